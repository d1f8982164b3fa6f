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
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// A lock's life ends in one of these states.
const (
	stateLive int32 = iota
	stateReleased
	stateLost
	stateExpired
)

// entry is a held lock as the protocol sees it (the driver's Data): its
// queue key, the lease it hangs on, and the one deletion of its key.
type entry struct {
	lk      *Locker
	ls      *lease
	key     string
	etcdKey string
	slot    int
	rev     int64
	// claim is the kit's claim of the lock: Lose ends it, Done is its Done.
	claim *driver.Claim[*entry]
	st    atomic.Int32
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
func (l *entry) stopWatch() {
	if l.watchTimer.Stop() {
		l.lk.forget(l)
	}
}

// settle moves a live lock to state s; false if it had already ended.
func (l *entry) settle(s int32) bool { return l.st.CompareAndSwap(stateLive, s) }

// lose settles a live lock as lost and tells the kit.
func (l *entry) lose() {
	if l.settle(stateLost) {
		l.claim.Lose()
	}
}

// isOwner is the comparison that holds while the lock is held.
func (l *entry) isOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.etcdKey), "=", l.rev)
}

// IsOwner returns the comparison that holds while l, a lock of an
// etcdlease Locker, is held: the holder's key still exists with the create
// revision it was taken at (its Fence). Put it in your own transaction so
// that a write succeeds only while you still own the lock:
//
//	owner, _ := etcdlease.IsOwner(l)
//	resp, err := cli.Txn(ctx).If(owner).Then(clientv3.OpPut("data", v)).Commit()
//	// !resp.Succeeded: the lock was lost, nothing was written.
//
// ok is false for a lock of another backend.
func IsOwner(l lockswap.Lock) (cmp clientv3.Cmp, ok bool) {
	e, ok := driver.Data[*entry](l)
	if !ok || e == nil {
		return clientv3.Cmp{}, false
	}
	return e.isOwner(), true
}

// EtcdKey returns the holder's key in etcd of l, a lock of an etcdlease
// Locker (queue prefix + this Locker's contender name); ok is false for a
// lock of another backend.
func EtcdKey(l lockswap.Lock) (key string, ok bool) {
	e, ok := driver.Data[*entry](l)
	if !ok || e == nil {
		return "", false
	}
	return e.etcdKey, true
}

// LeaseID returns the lease l's key is attached to, for a lock of an
// etcdlease Locker; ok is false for a lock of another backend.
func LeaseID(l lockswap.Lock) (id clientv3.LeaseID, ok bool) {
	e, ok := driver.Data[*entry](l)
	if !ok || e == nil {
		return 0, false
	}
	return e.ls.id, true
}

// Extend refreshes the lease, checks in one transaction that the key is
// still ours, and returns the lock's new deadline, now + ttl. It returns an
// error matching lockswap.ErrLost when the lock is no longer held,
// lockswap.ErrClosed after the Locker's Close, and lockswap.ErrInvalid for
// a TTL that ran out during the request (the lock then keeps its previous
// deadline).
func (d drv) Extend(ctx context.Context, c *driver.Claim[*entry], ttl time.Duration) (driver.Grant, error) {
	lk, l := d.lk, c.Data
	if lk.isClosed() {
		l.lose()
		return driver.Grant{}, errClosedLost
	}
	if !time.Now().Before(l.ls.leaseDeadline()) {
		if l.settle(stateExpired) {
			c.Lose()
		}
		return driver.Grant{}, fmt.Errorf("validity already over (the lease's keepalives went unanswered): %w", lockswap.ErrLost)
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
			return driver.Grant{}, fmt.Errorf("lease %x expired: %w", int64(l.ls.id), lockswap.ErrLost)
		}
		return driver.Grant{}, l.failAfterClose(err)
	}
	l.ls.refreshed(start, ka.TTL)
	resp, err := lk.c.Txn(rctx).If(l.isOwner()).Commit()
	if err != nil {
		return driver.Grant{}, l.failAfterClose(err)
	}
	if !resp.Succeeded {
		l.lose()
		return driver.Grant{}, fmt.Errorf("key %s no longer ours: %w", lockstate.QuoteKey(l.etcdKey), lockswap.ErrLost)
	}
	nd := start.Add(ttl - lockstate.Drift(ttl))
	if now := time.Now(); !now.Before(nd) {
		return driver.Grant{}, fmt.Errorf("ttl %v is too short: the request took %v, which left no validity (the lock keeps its previous deadline): %w",
			ttl, now.Sub(start).Round(time.Microsecond), lockswap.ErrInvalid)
	}
	return driver.Grant{Deadline: nd}, nil
}

// failAfterClose wraps a request's error, as ErrClosed when Close ended it.
func (l *entry) failAfterClose(err error) error {
	if l.lk.isClosed() {
		return closedBecause(err)
	}
	return l.lk.fail(err)
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
func (l *entry) startDelete(parent context.Context) *deletion {
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
func (l *entry) deleteKey(ctx context.Context, live bool) error {
	lk := l.lk
	if !live {
		resp, err := lk.c.Txn(ctx).If(l.isOwner()).Then(clientv3.OpDelete(l.etcdKey)).Commit()
		if err != nil {
			l.ls.retire()
			return lk.fail(err)
		}
		what := "the lock had already ended"
		if resp.Succeeded {
			lk.putSlot(l.slot)
			what += " (its key was still there and is now deleted)"
		}
		return fmt.Errorf("%s: %w", what, lockswap.ErrLost)
	}
	defer l.releasing.Store(false)
	resp, err := lk.c.Delete(ctx, l.etcdKey)
	if err != nil {
		return lk.fail(err)
	}
	if resp.Deleted == 0 {
		l.settle(stateLost)
		return fmt.Errorf("key %s was already gone: %w", lockstate.QuoteKey(l.etcdKey), lockswap.ErrLost)
	}
	settled := l.settle(stateReleased)
	// Done closes now, also when the caller of Release stopped waiting
	// for this delete (the kit then left the lock as it was).
	l.claim.Lose()
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
// was already released), an error matching lockswap.ErrLost when it had
// already been lost or had passed its deadline, and one matching
// lockswap.ErrClosed (and ErrLost) after the Locker's Close, whose
// revocation of the leases released it.
//
// The delete runs in the background (the Locker's group, bounded by
// lockswap.CleanupTimeout, ended by Close); Release waits for it until
// ctx's deadline (the kit's: the caller's plus lockswap.DeadlineGrace) and
// otherwise returns an error matching lockswap.ErrUnavailable (and ctx's
// error once the caller's context has ended) while the delete goes on: a
// later Release waits for the same one.
func (d drv) Release(ctx context.Context, c *driver.Claim[*entry]) error {
	lk, l := d.lk, c.Data
	if l.st.Load() == stateReleased {
		return nil
	}
	if lk.isClosed() {
		// Close revoked the Locker's leases, which deleted the key.
		l.lose()
		return errClosedLost
	}
	l.mu.Lock()
	del := l.startDelete(ctx)
	l.mu.Unlock()
	if del == nil {
		l.lose()
		return errClosedLost
	}
	if !awaitDone(ctx, del.done) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("etcd did not confirm the delete before the deadline (it goes on in the background, for up to %v): %w: %w",
				lockswap.CleanupTimeout, lockswap.ErrUnavailable, err)
		}
		return fmt.Errorf("etcd did not confirm the delete before the deadline (it goes on in the background, for up to %v): %w",
			lockswap.CleanupTimeout, lockswap.ErrUnavailable)
	}
	if del.err != nil && lk.isClosed() && errors.Is(del.err, lockswap.ErrUnavailable) {
		return errClosedLost
	}
	return del.err
}

// awaitDone waits for done until ctx ends or its deadline passes (a
// context of the kit's may carry a deadline that nothing cancels), and
// reports whether done closed.
func awaitDone(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
	}
	var expired <-chan time.Time
	if d, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
	case <-expired:
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// watch runs while the lock is held: it ends the lock when the key is
// deleted by anyone, and deletes the key when the lock's deadline passes
// without Extend (the lease would otherwise keep it).
func (l *entry) watch() {
	lk := l.lk
	defer lk.forget(l)
	ctx, cancel := context.WithCancel(lk.ctx)
	defer cancel()
	rev := l.rev + 1
	wch := lk.c.Watch(ctx, l.etcdKey, clientv3.WithRev(rev), clientv3.WithFilterPut())
	for {
		select {
		case <-l.claim.Done():
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
					l.lose()
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
					case <-l.claim.Done():
					}
					continue
				}
				if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != l.rev {
					l.lose()
					continue
				}
				rev = g.Header.Revision + 1
				wch = lk.c.Watch(ctx, l.etcdKey, clientv3.WithRev(rev), clientv3.WithFilterPut())
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && !l.releasing.Load() {
					l.lose()
				}
			}
			rev = wr.Header.Revision + 1
		}
	}
}
