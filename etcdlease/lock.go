package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// A lock's states: it starts live and ends released, lost or expired.
const (
	stateLive      int32 = iota
	stateReleasing       // Release is deleting the key (maybe in the background)
	stateReleased
	stateLost
	stateExpired
)

// entry is a held lock as the protocol sees it (the driver's Data): its
// queue key, the lease it hangs on, and the state that tells the watch
// whether the lock is still live.
type entry struct {
	lk      *Locker
	ls      *lease
	key     string
	etcdKey string
	// claimKey is a permit's slot key (SlotPrefix), deleted with etcdKey
	// while its value is still claimID (etcdKey without the queue
	// prefix); "" for the mutex.
	claimKey, claimID string
	slot              int
	rev               int64
	// watchFrom is the revision after which the watch looks for the
	// deletion of etcdKey: rev, or the slot's claim for a permit.
	watchFrom int64
	// claim is the kit's claim of the lock: Lose ends it, Done is its Done.
	claim *driver.Claim[*entry]
	st    atomic.Int32
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
// etcdlease Locker, is held: the holder's queue key still exists with the
// create revision it was taken at (the mutex's Fence; for a permit, the
// Fence is its slot's). Put it in your own transaction so that a write
// succeeds only while you still own the lock:
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
// lockswap.ErrClosed when the Locker's Close ended the request, and
// lockswap.ErrInvalid for a TTL that ran out during the request (the lock
// then keeps its previous deadline).
func (d drv) Extend(ctx context.Context, c *driver.Claim[*entry], ttl time.Duration) (driver.Grant, error) {
	lk, l := d.lk, c.Data
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
		return driver.Grant{}, fmt.Errorf("the request took %v, which left the ttl %v no validity (a slow server or a busy machine; the lock keeps its previous deadline): %w",
			now.Sub(start).Round(time.Microsecond), ttl, lockswap.ErrUnavailable)
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

// Release deletes the lock's key if it is still ours: one transaction
// compares the key's create revision with the lock's (the mutex's
// Fence), so that the request may be repeated, or land late, without ever deleting another
// holder's key, even once the key's name is reused (see contenderKey). It
// returns nil when it deleted our key, an error matching lockswap.ErrLost
// when the key was already gone or the lock had already ended (lost, or
// past its deadline: the key is then deleted if it is still ours), and one
// matching lockswap.ErrClosed after the Locker's Close, whose revocation
// of the leases released it.
//
// An etcd error leaves the key where it was as far as this client knows,
// so the lease it hangs on is retired (see lease.retire): once the last
// lock on it ends, the lease is revoked (or, without an answer, no longer
// kept alive and left to expire), which deletes the key unless a later
// request did. When the outcome is unknown (see uncertain) the kit sends
// the request again, within the caller's deadline and then in the
// background until lockswap.CleanupTimeout (ended by Close).
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
	// A releasing lock is no longer live: the watch takes neither the
	// deletion of its key for a loss nor its deadline for a reason to
	// delete it (the kit is releasing it).
	releasing := l.st.CompareAndSwap(stateLive, stateReleasing) || l.st.Load() == stateReleasing
	rctx, cancel := lk.reqCtx(ctx, nil)
	deleted, err := l.deleteKey(rctx)
	cancel()
	switch {
	case err != nil:
		if releasing && !uncertain(err) {
			// The request was refused: the lock is as it was.
			l.st.CompareAndSwap(stateReleasing, stateLive)
		}
		return l.failAfterClose(err)
	case !releasing:
		what := "the lock had already ended"
		if deleted {
			what += " (its key was still there and is now deleted)"
		}
		return fmt.Errorf("%s: %w", what, lockswap.ErrLost)
	case !deleted:
		l.st.CompareAndSwap(stateReleasing, stateLost)
		return fmt.Errorf("key %s was already gone: %w", lockstate.QuoteKey(l.etcdKey), lockswap.ErrLost)
	}
	l.st.CompareAndSwap(stateReleasing, stateReleased)
	return nil
}

// keyGone settles a live lock whose queue key the watch found deleted
// (by someone else) as lost and, for a permit, deletes its slot key while
// it is still its own: it would otherwise stay on the Locker's lease
// until a Release or another contender's take-over. A failed delete is
// left to those.
func (l *entry) keyGone(ctx context.Context) {
	if !l.settle(stateLost) {
		return // released, releasing or ended otherwise
	}
	l.claim.Lose()
	if l.claimKey == "" {
		return
	}
	rctx, cancel := l.lk.reqCtx(ctx, nil)
	defer cancel()
	_, _ = l.lk.c.Txn(rctx).If(clientv3.Compare(clientv3.Value(l.claimKey), "=", l.claimID)).
		Then(clientv3.OpDelete(l.claimKey)).Commit()
}

// deleteKey deletes l's key if its create revision is still the lock's,
// and reports whether it did. Only one request can: that one frees the
// key's slot. When no request can confirm it, the lease is retired, so
// that the key goes with the lease.
func (l *entry) deleteKey(ctx context.Context) (deleted bool, err error) {
	lk := l.lk
	del := []clientv3.Op{clientv3.OpDelete(l.etcdKey)}
	var orphan []clientv3.Op
	if l.claimKey != "" {
		// The slot key goes with its holder's key, while it is ours; when
		// the holder's key is gone already (deleted by someone else),
		// the slot key goes too, rather than stay on the lease.
		ours := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(l.claimKey), "=", l.claimID)},
			[]clientv3.Op{clientv3.OpDelete(l.claimKey)}, nil)
		del, orphan = append(del, ours), []clientv3.Op{ours}
	}
	resp, err := lk.c.Txn(ctx).If(l.isOwner()).Then(del...).Else(orphan...).Commit()
	if err != nil {
		if uncertain(err) {
			l.ls.retire() // the delete may or may not have landed
		}
		return false, lk.fail(err)
	}
	if resp.Succeeded {
		lk.putSlot(l.slot)
		l.stopWatch()
	}
	return resp.Succeeded, nil
}

// watch runs while the lock is held: it ends the lock when the key is
// deleted by anyone, and deletes the key when the lock's deadline passes
// without Extend (the lease would otherwise keep it).
func (l *entry) watch() {
	lk := l.lk
	defer lk.forget(l)
	ctx, cancel := context.WithCancel(lk.ctx)
	defer cancel()
	rev := max(l.rev, l.watchFrom) + 1
	wch := lk.c.Watch(ctx, l.etcdKey, clientv3.WithRev(rev), clientv3.WithFilterPut())
	for {
		select {
		case <-l.claim.Done():
			// At the deadline the key is deleted (the lease would keep
			// it), unless the lock ended otherwise: released or being
			// released (the kit's), lost.
			if l.settle(stateExpired) {
				rctx, rcancel := lk.reqCtx(ctx, nil)
				_, _ = l.deleteKey(rctx) // on failure the key goes with the lease
				rcancel()
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
					l.keyGone(ctx)
					continue
				}
				rev = g.Header.Revision + 1
				wch = lk.c.Watch(ctx, l.etcdKey, clientv3.WithRev(rev), clientv3.WithFilterPut())
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					l.keyGone(ctx) // not a releasing lock's (see Release)
				}
			}
			rev = wr.Header.Revision + 1
		}
	}
}
