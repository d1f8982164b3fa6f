package etcdlease

import (
	"context"
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
// Waiters watch (no polling): a writer the nearest key before its own,
// reading the queue again at each deletion; a reader reads every key
// before its own once, as it joins (no key can come before it later),
// and waits for the writers' among them to go, one after the other. A
// contender whose queue holds a mutex's or a semaphore's key before its
// own is refused with lockswap.ErrInvalid and removes its key, as a mutex
// or a permit contender is that finds a read-write lock's keys. A
// writer's TryAcquire puts its key only when the queue is empty, so that
// it keeps no reader out even for a moment.

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

// rw makes one attempt at c's read or write hold: TryAcquire's (wait
// false: ErrHeld when a key blocks it) or Acquire's (wait true: it waits,
// woken by the deletion of the key that blocks it). A writer's TryAcquire
// puts its key only when the queue is empty (a write hold needs that
// anyway), so that it never keeps readers out, even for a moment; the
// other attempts put the key and read the keys before it in one
// transaction. Its errors are not wrapped with the context's (the kit
// does that once).
func (lk *Locker) rw(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage, wait bool) (driver.Grant, error) {
	if size := len(lk.QueuePrefix(c.Key)); size > MaxPermitPrefixBytes {
		return driver.Grant{}, fmt.Errorf("key too large for a read-write hold: its queue prefix is %d bytes, the most for one is %d (MaxPermitPrefixBytes): %w",
			size, MaxPermitPrefixBytes, lockswap.ErrInvalid)
	}
	write := c.RW == lockswap.WriteHold
	if write && !wait {
		return lk.tryWrite(ctx, c)
	}
	ct, resp, err := lk.join(ctx, c, ob, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		return txn.Then(put, clientv3.OpGet(ct.pfx, rwPredOpts(write, 0)...))
	})
	if err != nil {
		return driver.Grant{}, err
	}
	myRev, header := resp.Header.Revision, resp.Header.Revision
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if !write {
		return lk.read(ctx, c, ct, myRev, header, kvs, ob, wait)
	}
	for {
		if len(kvs) == 0 || string(kvs[0].Key) != ct.key || kvs[0].CreateRevision != myRev {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
		}
		preds := kvs[1:]
		// Checked at every read: a mutex's or a permit's key further back
		// may have come this close meanwhile.
		if err := mixed(preds, ct.key, kindWrite, 0); err != nil {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, err
		}
		if len(preds) == 0 {
			return ct.held(ctx, c, myRev)
		}
		if err := lk.waitBlocker(ctx, ct, preds[0], header, ob); err != nil {
			return driver.Grant{}, err
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

// tryWrite is a writer's TryAcquire: put its key if the queue is empty,
// else read the first key, to tell a held read-write lock (ErrHeld) from
// another kind (ErrInvalid).
func (lk *Locker) tryWrite(ctx context.Context, c *driver.Claim[*entry]) (driver.Grant, error) {
	ct, resp, err := lk.join(ctx, c, nil, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		return txn.If(clientv3.Compare(clientv3.CreateRevision(ct.pfx), "=", 0).WithPrefix()).
			Then(put).Else(clientv3.OpGet(ct.pfx, firstOpts(1)...))
	})
	if err != nil {
		return driver.Grant{}, err
	}
	if !resp.Succeeded {
		ct.abandon() // nothing was written
		if err := mixed(resp.Responses[0].GetResponseRange().Kvs, ct.key, kindWrite, 0); err != nil {
			return driver.Grant{}, err
		}
		return driver.Grant{}, fmt.Errorf("read-write lock held or waited for: %w", lockswap.ErrHeld)
	}
	return ct.held(ctx, c, resp.Header.Revision)
}

// read is the rest of a reader's attempt after the transaction that put
// its key, created at myRev, and read every key before it (kvs, at
// revision header): no key can come before it later (revisions only
// grow), so that one read decides. Every key before must be a read-write
// lock's; the reader waits for the writers' among them to go, nearest
// first, without reading the queue again, then checks that its own key
// is still there.
func (lk *Locker) read(ctx context.Context, c *driver.Claim[*entry], ct *contender, myRev, header int64, kvs []*mvccKV, ob *driver.Outage, wait bool) (driver.Grant, error) {
	if len(kvs) == 0 || string(kvs[0].Key) != ct.key || kvs[0].CreateRevision != myRev {
		ct.giveBack(ctx, nil)
		return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
	}
	preds := kvs[1:]
	if err := mixed(preds, ct.key, kindRead, 0); err != nil {
		ct.giveBack(ctx, nil)
		return driver.Grant{}, err
	}
	var writers []*mvccKV // newest first
	for _, kv := range preds {
		if k, _ := kindOf(kv.Value); k == kindWrite {
			writers = append(writers, kv)
		}
	}
	if len(writers) == 0 {
		return ct.held(ctx, c, myRev)
	}
	if !wait {
		ct.giveBack(ctx, nil)
		return driver.Grant{}, fmt.Errorf("a writer holds or waits: %w", lockswap.ErrHeld)
	}
	for _, w := range writers {
		if err := lk.waitBlocker(ctx, ct, w, header, ob); err != nil {
			return driver.Grant{}, err
		}
	}
	ct.start = time.Now()
	rctx, cancel := lk.reqCtx(ctx, ob)
	g, err := lk.c.Get(rctx, ct.key, clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		ct.giveBack(ctx, nil) // our key exists: join put it
		return driver.Grant{}, lk.fail(err)
	}
	ob.Answered()
	if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != myRev {
		ct.giveBack(ctx, nil)
		return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
	}
	return ct.held(ctx, c, myRev)
}

// waitBlocker waits until b, a key before ct's as read at revision rev,
// is deleted. When the wait ends otherwise, ct's key is given back and
// the error is the attempt's (waitEnded).
func (lk *Locker) waitBlocker(ctx context.Context, ct *contender, b *mvccKV, rev int64, ob *driver.Outage) error {
	if err := lk.waitDelete(ctx, string(b.Key), b.CreateRevision, rev, ob); err != nil {
		return lk.waitEnded(ctx, ct, err)
	}
	return nil
}
