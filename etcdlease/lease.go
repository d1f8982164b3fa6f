package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// lease is one of a Locker's leases: granted on first use for a whole number
// of seconds, kept alive in the background until Close or until it is lost.
type lease struct {
	lk   *Locker
	secs int64

	ready chan struct{} // closed when the grant finished (id/ttl/err set)
	id    clientv3.LeaseID
	ttl   time.Duration // granted by the server
	err   error

	paused chan struct{} // closed by stopKeepalive (tests: a paused holder)

	// ctx ends when the lease is lost or the Locker closes: it stops the
	// keepalives.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	deadline time.Time // last acknowledged keepalive's send time + ttl - drift
	dead     bool
	locks    map[*entry]struct{}
	// users counts the attempts in progress and the live locks that use
	// the lease (see hold and done).
	users int
	// retired is set when a key on the lease could not be confirmed
	// deleted: no new attempt uses it, and it is revoked once idle.
	retired bool
}

// leaseSeconds is the lease TTL asked for a lock TTL: whole seconds, rounded
// up.
func leaseSeconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// lease returns the live lease for ttl, granting it on first use, with a
// hold on it for the caller's attempt (released by done, or passed on to
// the lock). ob, when it has a bound (Acquire's, see driver.Outage), bounds the
// wait for the grant by what is left of it.
func (lk *Locker) lease(ctx context.Context, ttl time.Duration, ob *driver.Outage) (*lease, error) {
	secs := leaseSeconds(ttl)
	var outageC <-chan time.Time
	if left, bounded := ob.Left(); bounded {
		t := time.NewTimer(max(left, 0))
		defer t.Stop()
		outageC = t.C
	}
	for {
		lk.mu.Lock()
		if lk.closed {
			lk.mu.Unlock()
			return nil, errClosed
		}
		ls := lk.leases[secs]
		if ls == nil {
			ls = &lease{lk: lk, secs: secs, ready: make(chan struct{}), paused: make(chan struct{}),
				locks: map[*entry]struct{}{}}
			ls.ctx, ls.cancel = context.WithCancel(lk.ctx)
			lk.leases[secs] = ls
			lk.all[ls] = struct{}{}
			lk.wg.Add(1)
			lk.mu.Unlock()
			go lk.grant(ls)
		} else {
			lk.mu.Unlock()
		}
		select {
		case <-ls.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a lease: %w: %w", lockswap.ErrUnavailable, ctx.Err())
		case <-outageC:
			return nil, fmt.Errorf("the lease grant went unanswered: %w", lockswap.ErrUnavailable)
		}
		if ls.err == nil && ls.hold() {
			return ls, nil
		}
		lk.mu.Lock()
		if lk.leases[secs] == ls {
			delete(lk.leases, secs)
		}
		if ls.err != nil {
			delete(lk.all, ls)
		}
		lk.mu.Unlock()
		if ls.err != nil {
			return nil, ls.err
		}
	}
}

// hold takes a hold on a live lease that is not retired.
func (ls *lease) hold() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.dead || ls.retired {
		return false
	}
	ls.users++
	return true
}

// done releases a hold taken by lease.
func (ls *lease) done() {
	ls.mu.Lock()
	ls.users--
	idle := ls.users <= 0 && ls.retired
	ls.mu.Unlock()
	if idle {
		ls.revokeRetired()
	}
}

// revokeRetired gives up a retired lease that nothing uses any more: no
// more keepalives, and a revoke (bounded by lockswap.CleanupTimeout) that
// deletes whatever key it still carries; if the revoke fails, the lease
// expires on the server after its TTL.
func (ls *lease) revokeRetired() {
	ls.lose()
	ls.lk.bg.Go(func(ctx context.Context) { _, _ = ls.lk.c.Revoke(ctx, ls.id) })
}

// retire takes the lease out of use: a key on it could not be confirmed
// deleted (a request whose outcome is unknown may have written it). New
// attempts get a new lease; this one is revoked once its last attempt and
// lock have ended, which deletes whatever key it still carries.
func (ls *lease) retire() {
	lk := ls.lk
	lk.mu.Lock()
	if lk.leases[ls.secs] == ls {
		delete(lk.leases, ls.secs)
	}
	lk.mu.Unlock()
	ls.mu.Lock()
	idle := !ls.retired && ls.users <= 0 // once: a release retried in the background retires it again
	ls.retired = true
	ls.mu.Unlock()
	if idle {
		ls.revokeRetired()
	}
}

// grant asks the server for ls's lease and starts its keepalive. It runs on
// its own goroutine, bounded by the request timeout, so that one caller's
// cancellation does not fail the others waiting for the same lease.
func (lk *Locker) grant(ls *lease) {
	defer lk.wg.Done()
	defer close(ls.ready)
	ctx, cancel := lk.reqCtx(lk.ctx, nil)
	sent := time.Now()
	resp, err := lk.c.Grant(ctx, ls.secs)
	cancel()
	if err != nil {
		ls.err = fmt.Errorf("grant a %d s lease %w", ls.secs, lk.fail(err))
		return
	}
	ls.id = resp.ID
	ls.ttl = time.Duration(resp.TTL) * time.Second
	ls.deadline = sent.Add(ls.ttl - lockstate.Drift(ls.ttl))
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		ls.err = fmt.Errorf("lease granted while closing: %w", lockswap.ErrClosed)
		rctx, cancel := context.WithTimeout(lk.cleanupCtx, lk.opts.RequestTimeout)
		_, _ = lk.c.Revoke(rctx, ls.id)
		cancel()
		return
	}
	lk.wg.Add(1)
	lk.mu.Unlock()
	go ls.run()
}

func (ls *lease) isDead() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.dead
}

// leaseDeadline is when the lease may expire on the server, as far as this
// client knows.
func (ls *lease) leaseDeadline() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.deadline
}

// refreshed records an acknowledged keepalive sent at sent.
func (ls *lease) refreshed(sent time.Time, ttlSeconds int64) {
	ttl := time.Duration(ttlSeconds) * time.Second
	d := sent.Add(ttl - lockstate.Drift(ttl))
	ls.mu.Lock()
	if !ls.dead && d.After(ls.deadline) {
		ls.deadline = d
	}
	ls.mu.Unlock()
}

func (ls *lease) add(e *entry) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.dead {
		return false
	}
	ls.locks[e] = struct{}{}
	return true
}

func (ls *lease) remove(e *entry) {
	ls.mu.Lock()
	delete(ls.locks, e)
	ls.mu.Unlock()
}

// lose marks the lease lost and ends every lock on it.
func (ls *lease) lose() {
	ls.mu.Lock()
	if ls.dead {
		ls.mu.Unlock()
		return
	}
	ls.dead = true
	ls.cancel()
	locks := make([]*entry, 0, len(ls.locks))
	for e := range ls.locks {
		locks = append(locks, e)
	}
	ls.mu.Unlock()
	ls.lk.mu.Lock()
	if ls.lk.leases[ls.secs] == ls {
		delete(ls.lk.leases, ls.secs)
	}
	delete(ls.lk.all, ls)
	ls.lk.mu.Unlock()
	for _, e := range locks {
		e.settle(stateLost)
		e.claim.Lose()
	}
}

// stopKeepalive stops sending keepalives, as if the holder's process were
// paused; the client-side deadline check still runs (tests only).
func (ls *lease) stopKeepalive() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	select {
	case <-ls.paused:
	default:
		close(ls.paused)
	}
}

// run keeps the lease alive: a keepalive every third of its TTL, retried
// every tenth on failure, until the Locker closes or the lease is lost. The
// lease counts as lost when the server no longer knows it or when its TTL
// passes, from the send time of the last acknowledged keepalive, without a
// new acknowledgement: the server cannot have expired it before then.
func (ls *lease) run() {
	lk := ls.lk
	defer lk.wg.Done()
	interval := ls.ttl / 3
	retry := max(ls.ttl/10, 20*time.Millisecond)
	next := time.NewTimer(interval)
	defer next.Stop()
	watchdog := time.NewTimer(time.Until(ls.leaseDeadline()))
	defer watchdog.Stop()
	paused := ls.paused
	for {
		select {
		case <-ls.ctx.Done():
			return
		case <-paused:
			next.Stop()
			paused = nil

		case <-watchdog.C:
			if d := time.Until(ls.leaseDeadline()); d > 0 {
				watchdog.Reset(d)
				continue
			}
			ls.lose()
			ls.revokeUnlessPaused()
			return
		case <-next.C:
			sent := time.Now()
			ctx, cancel := context.WithDeadline(ls.ctx, minTime(sent.Add(interval), ls.leaseDeadline()))
			resp, err := lk.c.KeepAliveOnce(ctx, ls.id)
			cancel()
			switch {
			case err == nil:
				ls.refreshed(sent, resp.TTL)
				next.Reset(interval)
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				ls.lose()
				return
			default:
				next.Reset(retry)
			}
			// The watchdog is re-armed from the (maybe moved) deadline when
			// it fires.
		}
	}
}

// revokeUnlessPaused revokes a lease this client gave up on, so that its
// keys are freed at once if the server still has it (a paused process would
// not, so a paused lease is left to expire).
func (ls *lease) revokeUnlessPaused() {
	select {
	case <-ls.paused:
		return
	default:
	}
	ctx, cancel := ls.lk.reqCtx(ls.lk.ctx, nil)
	_, _ = ls.lk.c.Revoke(ctx, ls.id)
	cancel()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
