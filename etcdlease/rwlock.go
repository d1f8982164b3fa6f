package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// Read-write locks (lockswap.WithRead, lockswap.WithWrite) use the mutex's
// queue: each contender puts its key under the lock's queue prefix,
// attached to its lease, with the value ReadValuePrefix or
// WriteValuePrefix + token. In create-revision order, a writer holds when
// no key is before its own, a reader when no writer's key is. The order
// is FIFO: a reader that comes after a waiting writer waits behind it, so
// a stream of readers does not starve the writer (the writer preference
// of the other backends, with arrival order on top), and a writer whose
// wait ends deletes its key, which lets the readers behind it in.
// driver.WriterWait is not needed: the queue key is the mark.
//
// A hold's fence is its key's create revision. Holds that conflict are
// granted in that order (a writer after every key before it is gone,
// readers after the writers before them), so a fence is higher than those
// of every conflicting hold granted before it; readers granted together
// may be granted in another order than their fences'.
//
// Waiters watch (no polling): a writer the nearest key before its own, a
// reader the nearest writer's key before its own. A contender whose queue
// holds a mutex's or a semaphore's key before its own is refused with
// lockswap.ErrInvalid and removes its key, as a mutex or a permit
// contender is that finds a read-write lock's keys.

// The values of the queue keys of read and write holds: the prefix, then
// the holder's token.
const (
	ReadValuePrefix  = "lockswap-read "
	WriteValuePrefix = "lockswap-write "
)

// tryRW is TryAcquire's attempt at a read or write hold.
func (lk *Locker) tryRW(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage) (driver.Grant, error) {
	return lk.rw(ctx, c, ob, false)
}

// waitRW is Acquire's attempt at a read or write hold.
func (lk *Locker) waitRW(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage) (driver.Grant, error) {
	return lk.rw(ctx, c, ob, true)
}

// rwPredOpts read a queue key created at myRev (0: the newest key) and
// the keys before it, newest first: all of them for a reader, which looks
// for the nearest writer's, the nearest one for a writer.
func rwPredOpts(write bool, myRev int64) []clientv3.OpOption {
	o := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	if write {
		o = append(o, clientv3.WithLimit(2))
	}
	if myRev > 0 {
		o = append(o, clientv3.WithMaxCreateRev(myRev))
	}
	return o
}

// blocker returns the key c must see deleted before it holds, among preds
// (the keys before its own, newest first): for a writer the nearest one,
// for a reader the nearest writer's; nil when there is none.
func blocker(preds []*mvccKV, write bool) *mvccKV {
	for _, kv := range preds {
		if k, _ := kindOf(kv.Value); write || k == kindWrite {
			return kv
		}
	}
	return nil
}

// rw makes one attempt at c's read or write hold: TryAcquire's (wait
// false: ErrHeld when a key blocks it) or Acquire's (wait true: it waits,
// woken by the deletion of the key that blocks it, and reads the queue
// again). One transaction puts the queue key and reads the keys before it.
// Its errors are not wrapped with the context's (the kit does that once).
func (lk *Locker) rw(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage, wait bool) (driver.Grant, error) {
	write := c.RW == lockswap.WriteHold
	ct, resp, err := lk.join(ctx, c, ob, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		return txn.Then(put, clientv3.OpGet(ct.pfx, rwPredOpts(write, 0)...))
	})
	if err != nil {
		return driver.Grant{}, err
	}
	myRev, header := resp.Header.Revision, resp.Header.Revision
	kvs := resp.Responses[1].GetResponseRange().Kvs
	for {
		if len(kvs) == 0 || string(kvs[0].Key) != ct.key || kvs[0].CreateRevision != myRev {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
		}
		preds := kvs[1:]
		// Checked at every read: a mutex's or a permit's key further back
		// may have come this close meanwhile.
		if err := mixed(preds, ct.key, kindOfClaim(c), 0); err != nil {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, err
		}
		b := blocker(preds, write)
		switch {
		case b == nil:
			return ct.held(ctx, c, myRev)
		case !wait:
			ct.giveBack(ctx, nil)
			if k, _ := kindOf(b.Value); k == kindWrite {
				return driver.Grant{}, fmt.Errorf("a writer holds or waits: %w", lockswap.ErrHeld)
			}
			return driver.Grant{}, fmt.Errorf("read holds held or waited for: %w", lockswap.ErrHeld)
		}
		if err := lk.waitDelete(ctx, string(b.Key), b.CreateRevision, header, ob); err != nil {
			ct.giveBack(ctx, nil) // our key exists: join put it
			switch {
			case errors.Is(err, lockswap.ErrClosed):
				return driver.Grant{}, errClosed
			case ctx.Err() != nil:
				return driver.Grant{}, lockswap.ErrHeld
			case errors.Is(err, lockswap.ErrUnavailable):
				return driver.Grant{}, err
			}
			return driver.Grant{}, lk.fail(err)
		}
		ct.start = time.Now()
		rctx, cancel := lk.reqCtx(ctx, ob)
		g, err := lk.c.Get(rctx, ct.pfx, rwPredOpts(write, myRev)...)
		cancel()
		if err != nil {
			ct.giveBack(ctx, nil) // our key exists: join put it
			return driver.Grant{}, lk.fail(err)
		}
		ob.Answered()
		kvs, header = g.Kvs, g.Header.Revision
	}
}
