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
	// mu orders Release's delete with the delete at the deadline.
	mu sync.Mutex
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
// error matching lockswap.ErrLost when the lock is no longer held.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := lockswap.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("%s: extend %q: %w", Backend, l.Key(), err)
	}
	if l.Ended() || !time.Now().Before(l.Deadline()) {
		l.settle(stateExpired)
		l.End()
		return fmt.Errorf("%s: extend %q: validity already over: %w", Backend, l.Key(), lockswap.ErrLost)
	}
	lk := l.lk
	start := time.Now()
	rctx, cancel := lk.reqCtx(ctx)
	defer cancel()
	ka, err := lk.c.KeepAliveOnce(rctx, l.ls.id)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.ls.lose()
			return fmt.Errorf("%s: extend %q: lease %x expired: %w", Backend, l.Key(), int64(l.ls.id), lockswap.ErrLost)
		}
		return lk.fail("extend", l.Key(), err)
	}
	l.ls.refreshed(start, ka.TTL)
	resp, err := lk.c.Txn(rctx).If(l.IsOwner()).Commit()
	if err != nil {
		return lk.fail("extend", l.Key(), err)
	}
	if !resp.Succeeded {
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: extend %q: key %q no longer ours: %w", Backend, l.Key(), l.etcdKey, lockswap.ErrLost)
	}
	if !l.SetDeadline(start.Add(ttl - lockstate.Drift(ttl))) {
		return fmt.Errorf("%s: extend %q: lock ended while extending: %w", Backend, l.Key(), lockswap.ErrLost)
	}
	return nil
}

// Release deletes the lock's key. It never deletes another holder's key:
// while the lock is live its key name is used by no other attempt (see
// contenderKey), so that delete is a plain one; once the lock has ended
// (lost, expired, Locker closed) the delete is a transaction that compares
// the key's create revision with Fence. It returns nil when our lock was
// removed (or was already released by this handle), and an error matching
// lockswap.ErrLost when it had already been lost or had passed its deadline.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.Load() == stateReleased {
		return nil
	}
	l.lk.mu.Lock()
	closed := l.lk.closed
	l.lk.mu.Unlock()
	if closed {
		// Close revoked the Locker's leases, which deleted the key.
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: release %q: the Locker was closed, which released the lock: %w", Backend, l.Key(), lockswap.ErrLost)
	}
	cctx, cancel := lockswap.CleanupContext(ctx)
	defer cancel()
	if l.st.Load() != stateLive {
		resp, err := l.lk.c.Txn(cctx).If(l.IsOwner()).Then(clientv3.OpDelete(l.etcdKey)).Commit()
		if err != nil {
			return l.lk.fail("release", l.Key(), err)
		}
		what := "the lock had already ended"
		if resp.Succeeded {
			what += " (its key was still there and is now deleted)"
		}
		return fmt.Errorf("%s: release %q: %s: %w", Backend, l.Key(), what, lockswap.ErrLost)
	}
	l.releasing.Store(true)
	defer l.releasing.Store(false)
	resp, err := l.lk.c.Delete(cctx, l.etcdKey)
	if err != nil {
		return l.lk.fail("release", l.Key(), err)
	}
	if resp.Deleted == 0 {
		l.settle(stateLost)
		l.End()
		return fmt.Errorf("%s: release %q: key %q was already gone: %w", Backend, l.Key(), l.etcdKey, lockswap.ErrLost)
	}
	settled := l.settle(stateReleased)
	l.End()
	l.stopWatch()
	if settled {
		l.lk.putSlot(l.slot)
	}
	return nil
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
			l.mu.Lock()
			if l.settle(stateExpired) {
				rctx, rcancel := lk.reqCtx(lk.ctx)
				resp, err := lk.c.Txn(rctx).If(l.IsOwner()).Then(clientv3.OpDelete(l.etcdKey)).Commit()
				rcancel()
				if err == nil && resp.Succeeded {
					lk.putSlot(l.slot)
				}
			}
			l.mu.Unlock()
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
				rctx, rcancel := lk.reqCtx(ctx)
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
