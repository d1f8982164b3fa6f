package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// A lock's life ends in one of these states.
const (
	stateLive int32 = iota
	stateReleased
	stateLost
	stateExpired
)

// Lock is a held etcd lock. Besides lockswap.Lock it tells its etcd key and
// offers [Lock.IsOwner] for the caller's own transactions.
type Lock struct {
	*lockstate.State
	lk      *Locker
	ls      *lease
	etcdKey string
	slot    int
	rev     int64
	st      atomic.Int32
	// releasing is set while Release's delete is in flight, so that the
	// watch does not take our own deletion for a loss.
	releasing atomic.Bool
	// mu guards del: the one deletion in flight, by Release or at the
	// deadline, so that a plain delete never follows the confirmed one
	// (after which the slot may belong to another attempt).
	mu  sync.Mutex
	del *deletion
	// watchTimer starts the watch (see WatchDelay).
	watchTimer *time.Timer
}

// stopWatch cancels a watch that has not started yet.
func (l *Lock) stopWatch() {
	if l.watchTimer.Stop() {
		l.lk.forget(l)
	}
}

var _ lockswap.Lock = (*Lock)(nil)

// settle moves a live lock to state s; false if it had already ended.
func (l *Lock) settle(s int32) bool { return l.st.CompareAndSwap(stateLive, s) }

// EtcdKey is this holder's key in etcd (queue prefix + token).
func (l *Lock) EtcdKey() string { return l.etcdKey }

// LeaseID is the lease the key is attached to.
func (l *Lock) LeaseID() clientv3.LeaseID { return l.ls.id }

// IsOwner is the comparison that holds while this lock is held: the
// holder's key still exists with the create revision it was taken at (its
// Fence). Put it in your own transaction so that a write succeeds only while
// you still own the lock:
//
//	resp, err := cli.Txn(ctx).If(l.IsOwner()).Then(clientv3.OpPut("data", v)).Commit()
//	// !resp.Succeeded: the lock was lost, nothing was written.
func (l *Lock) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.etcdKey), "=", l.rev)
}

// IsOwner returns l's ownership comparison (see [Lock.IsOwner]) when l is an
// etcdlease lock.
func IsOwner(l lockswap.Lock) (clientv3.Cmp, bool) {
	el, ok := l.(*Lock)
	if !ok {
		return clientv3.Cmp{}, false
	}
	return el.IsOwner(), true
}

// Deadline is the earlier of the lock's own deadline (start + TTL - drift,
// moved by Extend) and the lease's deadline as this client knows it (last
// acknowledged keepalive's send time + granted TTL - drift).
func (l *Lock) Deadline() time.Time {
	return minTime(l.State.Deadline(), l.ls.leaseDeadline())
}

// Extend refreshes the lease, checks in one transaction that the key is
// still ours, and moves the lock's deadline to now + ttl. It returns an
// error matching lockswap.ErrLost when the lock is no longer held,
// lockswap.ErrClosed after the Locker's Close, and lockswap.ErrInvalid for
// a TTL outside [Locker.TTLRange] or one that ran out during the request
// (the lock then keeps its previous deadline). It returns by ctx's
// deadline.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	lk := l.lk
	if err := lk.checkTTL("extend", l.Key(), ttl); err != nil {
		return err
	}
	if lk.isClosed() {
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: extend %s: the Locker was closed, which released the lock: %w (%w)", Backend,
			lockstate.QuoteKey(l.Key()), lockswap.ErrClosed, lockswap.ErrLost)
	}
	if l.Ended() || !time.Now().Before(l.Deadline()) {
		l.settle(stateExpired)
		l.End()
		return fmt.Errorf("%s: extend %s: validity already over: %w", Backend, lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	cctx, stop := lk.callCtx(ctx)
	defer stop()
	start := time.Now()
	rctx, cancel := lk.reqCtx(cctx, nil)
	defer cancel()
	ka, err := lk.c.KeepAliveOnce(rctx, l.ls.id)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.ls.lose()
			return fmt.Errorf("%s: extend %s: lease %x expired: %w", Backend, lockstate.QuoteKey(l.Key()), int64(l.ls.id), lockswap.ErrLost)
		}
		return l.failAfterClose("extend", err)
	}
	l.ls.refreshed(start, ka.TTL)
	resp, err := lk.c.Txn(rctx).If(l.IsOwner()).Commit()
	if err != nil {
		return l.failAfterClose("extend", err)
	}
	if !resp.Succeeded {
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: extend %s: key %s no longer ours: %w", Backend, lockstate.QuoteKey(l.Key()), lockstate.QuoteKey(l.etcdKey), lockswap.ErrLost)
	}
	nd := start.Add(ttl - lockstate.Drift(ttl))
	if now := time.Now(); !now.Before(nd) {
		return fmt.Errorf("%s: extend %s: ttl %v is too short: the request took %v, which left no validity (the lock keeps its previous deadline): %w",
			Backend, lockstate.QuoteKey(l.Key()), ttl, now.Sub(start).Round(time.Microsecond), lockswap.ErrInvalid)
	}
	if !l.SetDeadline(nd) {
		return fmt.Errorf("%s: extend %s: lock ended while extending: %w", Backend, lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	l.SetTTL(ttl)
	return nil
}

// failAfterClose wraps a request's error, as ErrClosed when Close ended it.
func (l *Lock) failAfterClose(op string, err error) error {
	if l.lk.isClosed() {
		return fmt.Errorf("%w (%v)", closedErr(op, l.Key()), err)
	}
	return l.lk.fail(op, l.Key(), err)
}

// deletion is the one request in flight that deletes a lock's key.
type deletion struct {
	done chan struct{}
	err  error // set before done closes
}

func (d *deletion) failed() bool {
	select {
	case <-d.done:
		return d.err != nil && errors.Is(d.err, lockswap.ErrUnavailable)
	default:
		return false
	}
}

// startDelete starts the deletion of l's key unless one is in flight or
// has succeeded, and returns it; nil when the Locker is closed. Called with
// l.mu held. A live lock's key is deleted plainly (its name is used by no
// other attempt while the slot is not freed), an ended one's only if its
// create revision is still the fence. The request runs in the background
// (the Locker's group, with parent's values, bounded by
// lockswap.CleanupTimeout and ended by Close); when it cannot confirm the
// deletion of a key that nobody else will delete (the lock ended), the
// lease is retired, so that the key goes with it.
func (l *Lock) startDelete(parent context.Context) *deletion {
	if l.del != nil && !l.del.failed() {
		return l.del
	}
	live := l.st.Load() == stateLive
	d := &deletion{done: make(chan struct{})}
	lk := l.lk
	if live {
		l.releasing.Store(true)
	}
	ok := lk.bg.Go(parent, func(ctx context.Context) {
		defer close(d.done)
		d.err = l.deleteKey(ctx, live)
	})
	if !ok {
		l.releasing.Store(false)
		return nil
	}
	l.del = d
	return d
}

// deleteKey sends the deletion of l's key and settles the lock by its
// outcome.
func (l *Lock) deleteKey(ctx context.Context, live bool) error {
	lk, q := l.lk, lockstate.QuoteKey(l.Key())
	if !live {
		resp, err := lk.c.Txn(ctx).If(l.IsOwner()).Then(clientv3.OpDelete(l.etcdKey)).Commit()
		if err != nil {
			l.ls.retire()
			return lk.fail("release", l.Key(), err)
		}
		what := "the lock had already ended"
		if resp.Succeeded {
			lk.putSlot(l.slot)
			what += " (its key was still there and is now deleted)"
		}
		return fmt.Errorf("%s: release %s: %s: %w", Backend, q, what, lockswap.ErrLost)
	}
	defer l.releasing.Store(false)
	resp, err := lk.c.Delete(ctx, l.etcdKey)
	if err != nil {
		return lk.fail("release", l.Key(), err)
	}
	if resp.Deleted == 0 {
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: release %s: key %s was already gone: %w", Backend, q, lockstate.QuoteKey(l.etcdKey), lockswap.ErrLost)
	}
	settled := l.settle(stateReleased)
	l.End()
	l.stopWatch()
	if settled {
		lk.putSlot(l.slot)
	}
	return nil
}

// Release deletes the lock's key. It never deletes another holder's key:
// while the lock is live its key name is used by no other attempt (see
// contenderKey), so that delete is a plain one; once the lock has ended
// (lost, expired) the delete is a transaction that compares the key's
// create revision with Fence. It returns nil when our lock was removed (or
// was already released by this handle), an error matching lockswap.ErrLost
// when it had already been lost or had passed its deadline, and one
// matching lockswap.ErrClosed (and ErrLost) after the Locker's Close, whose
// revocation of the leases released it.
//
// The delete runs even if ctx is already cancelled, bounded by
// lockswap.CleanupTimeout, but Release waits for it only until ctx's
// deadline plus lockswap.DeadlineGrace (the grace from now when ctx has
// already ended), as with every backend: it then returns an error matching
// lockswap.ErrUnavailable (and ctx's error, once ctx has ended) while the
// delete goes on in the background, ended by Close at the latest (a later
// Release waits for the same one).
func (l *Lock) Release(ctx context.Context) error {
	if l.st.Load() == stateReleased {
		return nil
	}
	lk, q := l.lk, lockstate.QuoteKey(l.Key())
	if lk.isClosed() {
		// Close revoked the Locker's leases, which deleted the key.
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: release %s: the Locker was closed, which released the lock: %w (%w)", Backend, q, lockswap.ErrClosed, lockswap.ErrLost)
	}
	l.mu.Lock()
	d := l.startDelete(ctx)
	l.mu.Unlock()
	if d == nil {
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: release %s: the Locker was closed, which released the lock: %w (%w)", Backend, q, lockswap.ErrClosed, lockswap.ErrLost)
	}
	if !awaitCleanup(ctx, d.done, lockswap.CleanupTimeout) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: release %s: etcd did not confirm the delete before the context ended (it goes on in the background, for up to %v): %w: %w",
				Backend, q, lockswap.CleanupTimeout, lockswap.ErrUnavailable, err)
		}
		return fmt.Errorf("%s: release %s: etcd did not confirm the delete within %v: %w",
			Backend, q, lockswap.CleanupTimeout, lockswap.ErrUnavailable)
	}
	if d.err != nil && lk.isClosed() && errors.Is(d.err, lockswap.ErrUnavailable) {
		return fmt.Errorf("%s: release %s: the Locker was closed, which released the lock: %w (%w)", Backend, q, lockswap.ErrClosed, lockswap.ErrLost)
	}
	return d.err
}

// watch runs while the lock is held: it ends the lock when the key is
// deleted by anyone, and deletes the key when the lock's deadline passes
// without Extend (the lease would otherwise keep it).
func (l *Lock) watch() {
	lk := l.lk
	defer lk.forget(l)
	ctx, cancel := context.WithCancel(lk.ctx)
	defer cancel()
	rev := l.rev + 1
	wch := lk.c.Watch(ctx, l.etcdKey, clientv3.WithRev(rev), clientv3.WithFilterPut())
	for {
		select {
		case <-l.Done():
			// At the deadline the key is deleted (the lease would keep
			// it), unless Release is already at it.
			// A Release in flight is waited for first: if its delete
			// fails, the key is deleted here.
			for i := 0; i < 2; i++ {
				l.mu.Lock()
				d := l.del
				if (d == nil || d.failed()) && l.settle(stateExpired) {
					d = l.startDelete(ctx)
				}
				l.mu.Unlock()
				if d == nil {
					return
				}
				select {
				case <-d.done:
				case <-lk.cleanupCtx.Done():
					return
				}
			}
			return
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				if ctx.Err() != nil || lk.c.Ctx().Err() != nil {
					if l.settle(stateLost) {
						l.End()
					}
					return
				}
				// The watch broke (compaction, member loss): check the key
				// and watch again from the revision of that check.
				rctx, rcancel := lk.reqCtx(ctx, nil)
				g, err := lk.c.Get(rctx, l.etcdKey)
				rcancel()
				if err != nil {
					select {
					case <-time.After(50 * time.Millisecond):
					case <-l.Done():
					}
					continue
				}
				if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != l.rev {
					if l.settle(stateLost) {
						l.End()
					}
					continue
				}
				rev = g.Header.Revision + 1
				wch = lk.c.Watch(ctx, l.etcdKey, clientv3.WithRev(rev), clientv3.WithFilterPut())
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && !l.releasing.Load() && l.settle(stateLost) {
					l.End()
				}
			}
			rev = wr.Header.Revision + 1
		}
	}
}
