package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// drv is the protocol the kit runs (driver.Driver, driver.Waiter and
// driver.Bounder). Its errors carry no "etcdlease: op key:" prefix: the
// kit adds it.
type drv struct{ lk *Locker }

var (
	_ driver.Driver[*entry]  = drv{}
	_ driver.Waiter[*entry]  = drv{}
	_ driver.Bounder[*entry] = drv{}
)

// Acquire is TryAcquire's one attempt: it takes the lock only when nobody
// holds or waits for it (one transaction puts our key if the queue prefix
// is empty).
func (d drv) Acquire(ctx context.Context, c *driver.Claim[*entry]) (driver.Grant, error) {
	switch {
	case c.Permits > 0:
		return d.lk.attempt(ctx, c, nil, d.lk.tryPermit)
	case c.RW != lockswap.NotRW:
		return d.lk.attempt(ctx, c, nil, d.lk.tryRW)
	}
	return d.lk.attempt(ctx, c, nil, d.lk.putIfEmpty)
}

// Wait is one attempt of Acquire: it joins the lock's queue and waits,
// woken by a watch, until it is first. The wait ends early when ctx ends
// (the queue key is then removed; ErrHeld), when the Locker is closed
// (ErrClosed), and when etcd has answered none of its requests for the
// call's outage bound (ErrUnavailable: the kit decides whether to try
// again). Errors that retrying cannot fix (ErrInvalid) end it at once.
func (d drv) Wait(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage) (driver.Grant, error) {
	switch {
	case c.Permits > 0:
		return d.lk.attempt(ctx, c, ob, d.lk.waitPermit)
	case c.RW != lockswap.NotRW:
		return d.lk.attempt(ctx, c, ob, d.lk.waitRW)
	}
	return d.lk.attempt(ctx, c, ob, d.lk.queue)
}

// attempt runs try, one attempt, under ctx also cancelled by Close: an
// attempt that fails once Close has begun (its leases revoked, its calls
// cancelled) fails with ErrClosed.
func (lk *Locker) attempt(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage,
	try func(context.Context, *driver.Claim[*entry], *driver.Outage) (driver.Grant, error)) (driver.Grant, error) {
	cctx, stop := lk.callCtx(ctx)
	defer stop()
	g, err := try(cctx, c, ob)
	if err != nil && lk.isClosed() {
		return g, closedBecause(err)
	}
	return g, err
}

// contender is one attempt's place in a lock's queue: its key, the slot
// that names it, and its hold on the lease the key is attached to.
type contender struct {
	lk   *Locker
	pfx  string // the queue prefix
	key  string // our key in it
	slot int
	ls   *lease
	// start is when the request that may have made the lock ours was
	// sent: the lock's validity counts from it.
	start time.Time
	// A permit's slot key (set while the request that may create it is
	// sent, and after), the revision that created it (the permit's
	// fence) and its slot number.
	claimKey   string
	claimRev   int64
	permitSlot int
}

// join takes a lease and a slot for c's attempt and sends, in one
// transaction, the put of its queue key and what build adds (the
// condition of TryAcquire, the read of the queue of Acquire). When the
// request fails, the key (which it may have written) is given back.
func (lk *Locker) join(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage,
	build func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn) (*contender, *clientv3.TxnResponse, error) {
	ls, err := lk.lease(ctx, c.TTL, ob)
	if err != nil {
		return nil, nil, err
	}
	pfx := lk.QueuePrefix(c.Key)
	// The slot's key name is ours alone (see contenderKey), so the put
	// needs no compare.
	slot := lk.takeSlot()
	ct := &contender{lk: lk, pfx: pfx, key: lk.contenderKey(pfx, slot), slot: slot, ls: ls, start: time.Now()}
	rctx, cancel := lk.reqCtx(ctx, ob)
	resp, err := build(lk.c.Txn(rctx), ct, clientv3.OpPut(ct.key, contenderValue(c), clientv3.WithLease(ls.id))).Commit()
	cancel()
	if err != nil {
		ct.giveBack(ctx, err)
		return nil, nil, lk.fail(err)
	}
	ob.Answered()
	return ct, resp, nil
}

// putIfEmpty is TryAcquire's attempt: put our key if the queue is empty.
func (lk *Locker) putIfEmpty(ctx context.Context, c *driver.Claim[*entry], _ *driver.Outage) (driver.Grant, error) {
	ct, resp, err := lk.join(ctx, c, nil, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(ct.pfx), "=", 0).WithPrefix()).Then(put)
		if len(ct.pfx) <= MaxPermitPrefixBytes {
			// Read the first key when the queue is not empty, to tell a
			// semaphore's permits from a held mutex.
			txn = txn.Else(clientv3.OpGet(ct.pfx, firstOpts(1)...))
		}
		return txn
	})
	if err != nil {
		return driver.Grant{}, err
	}
	if !resp.Succeeded {
		ct.abandon() // nothing was written
		if len(resp.Responses) > 0 {
			if err := mixed(resp.Responses[0].GetResponseRange().Kvs, ct.key, kindMutex, 0); err != nil {
				return driver.Grant{}, err
			}
		}
		return driver.Grant{}, lockswap.ErrHeld
	}
	return ct.held(ctx, c, resp.Header.Revision)
}

// Bound is the lease's deadline as this client knows it: the send time of
// its last acknowledged keepalive + its granted TTL - drift.
func (drv) Bound(c *driver.Claim[*entry]) time.Time {
	if c.Data == nil {
		return time.Time{}.Add(1<<63 - 1)
	}
	return c.Data.ls.leaseDeadline()
}

// queueOpts read the newest two keys of the queue up to a create revision:
// our own key and the one just before it.
func queueOpts(maxRev int64) []clientv3.OpOption {
	o := []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)}
	if maxRev > 0 {
		o = append(o, clientv3.WithMaxCreateRev(maxRev))
	}
	return o
}

// queue makes one attempt of Acquire. Its errors are not wrapped with the
// context's (the kit does that once).
func (lk *Locker) queue(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage) (driver.Grant, error) {
	ct, resp, err := lk.join(ctx, c, ob, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		return txn.Then(put, clientv3.OpGet(ct.pfx, queueOpts(0)...))
	})
	if err != nil {
		return driver.Grant{}, err
	}
	myRev := resp.Header.Revision
	kvs := resp.Responses[1].GetResponseRange().Kvs
	header := resp.Header.Revision
	for {
		if len(kvs) == 0 || string(kvs[0].Key) != ct.key {
			// Our key is gone: the lease expired while we waited.
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
		}
		if len(kvs) == 1 {
			return ct.held(ctx, c, myRev)
		}
		if err := mixed(kvs[1:], ct.key, kindMutex, 0); err != nil {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, err
		}
		if err := lk.waitBlocker(ctx, ct, kvs[1], header, ob); err != nil {
			return driver.Grant{}, err
		}
		ct.start = time.Now()
		rctx, cancel := lk.reqCtx(ctx, ob)
		g, err := lk.c.Get(rctx, ct.pfx, queueOpts(myRev)...)
		cancel()
		if err != nil {
			ct.giveBack(ctx, nil) // our key exists: join put it
			return driver.Grant{}, lk.fail(err)
		}
		ob.Answered()
		kvs, header = g.Kvs, g.Header.Revision
	}
}

// waitEnded gives back ct's key, which join put, after its wait ended
// with err rather than the deletion it waited for, and returns the
// attempt's error: ErrClosed when Close ended it, ErrHeld when its context
// did, the outage as it is, anything else classified.
func (lk *Locker) waitEnded(ctx context.Context, ct *contender, err error) error {
	ct.giveBack(ctx, nil)
	switch {
	case errors.Is(err, lockswap.ErrClosed):
		return errClosed
	case ctx.Err() != nil:
		return lockswap.ErrHeld
	case errors.Is(err, lockswap.ErrUnavailable):
		return err
	}
	return lk.fail(err)
}

// waitDelete waits until k, created at revision created, is deleted after
// revision rev, at which the caller read it. (A later key of the same name
// is a later contender: its presence means ours is gone.)
func (lk *Locker) waitDelete(ctx context.Context, k string, created, rev int64, ob *driver.Outage) error {
	// check reads k: done when it is gone or is another contender's.
	check := func() (done bool, at int64, err error) {
		rctx, rcancel := lk.reqCtx(ctx, ob)
		g, err := lk.c.Get(rctx, k)
		rcancel()
		if err != nil {
			return false, 0, err
		}
		ob.Answered()
		return len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != created, g.Header.Revision, nil
	}
	return lk.waitDeletions(ctx, k, rev, check, nil, ob)
}

// waitDeletions waits for a deletion of k (of a key under k for which
// relevant, when set, is true, with clientv3.WithPrefix in opts) after
// revision rev, at which the caller
// found what it waits for not done, or until check, which reads the
// server, says it is done; check also returns the revision it read at.
//
// The watch starts at the server's current revision ("from now"): such a
// watch is synced and gets each event as soon as it is committed. A watch
// from rev+1 would do when nothing was written since rev, but under
// contention other writes have moved the revision on by the time the watch
// is registered, and a watch from a past revision waits for the server's
// unsynced-watcher loop (every 100 ms). A deletion between rev and the
// watch's creation is caught by a check once the watch exists.
//
// While the watch stays quiet, check runs every probeEvery (or a third of
// the outage bound when smaller): that tells a held lock from an etcd that
// no longer answers, which ends the wait with ErrUnavailable once the
// outage bound has passed (never, without a bound). Each watch's creation
// is bounded like a request (see startWatch).
func (lk *Locker) waitDeletions(ctx context.Context, k string, rev int64, check func() (done bool, at int64, err error), relevant func(key []byte) bool, ob *driver.Outage, opts ...clientv3.OpOption) error {
	stopWatch := func() {}
	defer func() { stopWatch() }()
	closing := lk.ctx.Done()
	probe := time.NewTicker(probePeriod(ob))
	defer probe.Stop()
	recheck := func() (bool, error) {
		done, at, err := check()
		if err == nil && !done {
			rev = at
		}
		return done, err
	}
	for {
		stopWatch() // the previous watch, if any, has ended
		wch, cancel, err := lk.startWatch(ctx, k, ob, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		stopWatch = cancel
		for {
			var wr clientv3.WatchResponse
			var ok bool
			select {
			case wr, ok = <-wch:
			case <-closing:
				return fmt.Errorf("waiting for %s: %w", lockstate.QuoteKey(k), errClosed)
			case <-ctx.Done():
				return ctx.Err()
			case <-probe.C:
				done, err := recheck()
				if done {
					return nil
				}
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if classify(err) == lockswap.ErrInvalid {
						return err
					}
					if ob.Over() {
						return fmt.Errorf("waiting for %s: %w: %w", lockstate.QuoteKey(k), lockswap.ErrUnavailable, err)
					}
				}
				continue
			}
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				break // the watch ended (member lost): watch again
			}
			if err := wr.Err(); err != nil {
				return nil // cancelled by the server: the caller re-reads the queue
			}
			ob.Answered()
			if wr.Created {
				if wr.Header.Revision <= rev {
					continue
				}
				done, err := recheck()
				if err != nil {
					return err
				}
				if done {
					return nil
				}
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && (relevant == nil || relevant(ev.Kv.Key)) {
					return nil
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Check again before the next watch, as after any gap.
		done, err := recheck()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// startWatch watches the deletion of k (with opts: of the keys they
// select) from now. clientv3's Watch blocks
// until etcd confirms the watch (and, on a shared stream, until it has
// confirmed the watches asked before), bounded only by its context: here
// that wait is bounded like a request (see reqCtx). When etcd does not
// confirm in time the watch is cancelled and the error matches
// lockswap.ErrUnavailable and context.DeadlineExceeded. The watch ends with
// ctx or when the returned cancel is called.
func (lk *Locker) startWatch(ctx context.Context, k string, ob *driver.Outage, opts ...clientv3.OpOption) (clientv3.WatchChan, context.CancelFunc, error) {
	wctx, cancel := context.WithCancel(ctx)
	d := lk.reqTimeout(ob)
	t := time.AfterFunc(d, cancel)
	wch := lk.c.Watch(wctx, k, append([]clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}, opts...)...)
	if !t.Stop() {
		cancel()
		return nil, nil, fmt.Errorf("watching %s: etcd did not confirm the watch within %v: %w: %w",
			lockstate.QuoteKey(k), d, lockswap.ErrUnavailable, context.DeadlineExceeded)
	}
	return wch, cancel, nil
}

// giveBack deletes our queue key after a failed or cancelled attempt and
// releases the attempt's hold on its lease. A request that failed may
// still land on the server (its reply lost or late), so the delete always
// runs, in the background (lk.bg, bounded by lockswap.CleanupTimeout and
// ended by Close); the caller waits for it only within its own bound (see
// awaitGiveBack). The slot is reused only when the delete is confirmed;
// when it cannot be, the lease is retired, so that the key goes with it.
// After Close nothing is sent: Close revoked the lease (or let it expire).
func (ct *contender) giveBack(ctx context.Context, cause error) {
	lk, ls := ct.lk, ct.ls
	if cause != nil && classify(cause) == lockswap.ErrInvalid && !errors.Is(cause, context.DeadlineExceeded) {
		ct.abandon() // the server refused the request: nothing was written
		return
	}
	if lk.isClosed() {
		// Close revokes the lease (or lets it expire): the key goes with
		// it, and Close need not wait for a delete.
		ls.done()
		return
	}
	done := make(chan struct{})
	if !lk.bg.Go(func(bctx context.Context) {
		defer close(done)
		defer ls.done()
		if err := ct.deleteKeys(bctx); err == nil {
			lk.putSlot(ct.slot)
			return
		}
		ls.retire()
	}) {
		ls.done()
		return
	}
	awaitGiveBack(ctx, done)
}

// deleteKeys deletes ct's queue key and, for a permit, its slot key if it
// is ct's.
func (ct *contender) deleteKeys(ctx context.Context) error {
	if ct.claimKey == "" {
		_, err := ct.lk.c.Delete(ctx, ct.key)
		return err
	}
	_, err := ct.lk.c.Txn(ctx).If(clientv3.Compare(clientv3.Value(ct.claimKey), "=", ct.id())).
		Then(clientv3.OpDelete(ct.claimKey), clientv3.OpDelete(ct.key)).
		Else(clientv3.OpDelete(ct.key)).Commit()
	return err
}

// id is ct's queue key without the queue prefix: the value of the slot
// key a permit holds.
func (ct *contender) id() string { return strings.TrimPrefix(ct.key, ct.pfx) }

// abandon frees the slot and the lease hold of an attempt that wrote
// nothing.
func (ct *contender) abandon() {
	ct.lk.putSlot(ct.slot)
	ct.ls.done()
}

// awaitGiveBack waits for done, the deletion of a failed attempt's queue
// key, so that an attempt ended by its caller leaves nothing when Acquire
// returns (a healthy etcd deletes in milliseconds). It waits at most
// attempt.Grace from now, and never past ctx's deadline: that is the bound
// of the call (TryAcquire's attempt gets a context whose deadline already
// has the kit's grace; a Wait's ends with the caller's), and a delete
// still going on then goes on in the background.
func awaitGiveBack(ctx context.Context, done <-chan struct{}) {
	wait := attempt.Grace
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d))
	}
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// contenderKey is the key of contender slot in the queue pfx: the Locker's
// random id (64 bits) and a slot number. A slot goes back to the free list
// only once this Locker has seen its key deleted by its own request, after
// which no handle that used it sends another plain delete; until then the
// name belongs to one attempt or lock alone. That makes the put of Acquire
// and the delete of Release safe without a compare. Reusing slots keeps a
// busy lock from leaving an ever-growing set of deleted keys in etcd's index
// (which every prefix read walks until the next compaction); the create
// revision, not the name, tells holders apart (Fence, IsOwner).
func (lk *Locker) contenderKey(pfx string, slot int) string {
	return pfx + lk.id + "-" + strconv.Itoa(slot)
}

func (lk *Locker) takeSlot() int {
	lk.slotMu.Lock()
	defer lk.slotMu.Unlock()
	if n := len(lk.freeSlots); n > 0 {
		s := lk.freeSlots[n-1]
		lk.freeSlots = lk.freeSlots[:n-1]
		return s
	}
	lk.nextSlot++
	return lk.nextSlot
}

func (lk *Locker) putSlot(s int) {
	lk.slotMu.Lock()
	lk.freeSlots = append(lk.freeSlots, s)
	lk.slotMu.Unlock()
}

// held makes the lock's entry (c.Data) of ct, whose key was created at
// revision rev, and starts watching its key; its deadline counts from the
// request that found it ours. The attempt's hold on the lease passes to
// the lock (released by forget). A lock whose lease's deadline passed
// during the acquisition is given back (ErrUnavailable); one whose TTL the
// acquisition used up, the kit gives back (ErrInvalid).
func (ct *contender) held(ctx context.Context, c *driver.Claim[*entry], rev int64) (driver.Grant, error) {
	lk, ls, ttl := ct.lk, ct.ls, c.TTL
	deadline := ct.start.Add(ttl - lockstate.Drift(ttl))
	if !time.Now().Before(ls.leaseDeadline()) {
		ct.giveBack(ctx, nil)
		return driver.Grant{}, fmt.Errorf("the lease's keepalives went unanswered past its deadline: %w", lockswap.ErrUnavailable)
	}
	e := &entry{lk: lk, ls: ls, key: c.Key, etcdKey: ct.key, slot: ct.slot, rev: rev, watchFrom: ct.claimRev, claim: c}
	if ct.claimKey != "" {
		e.claimKey, e.claimID = ct.claimKey, ct.id()
	}
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		ls.done()
		e.settle(stateLost)
		// Close revoked the lease (or let it expire): the key goes with it.
		return driver.Grant{}, errClosed
	}
	if !ls.add(e) {
		lk.mu.Unlock()
		e.settle(stateLost)
		ct.giveBack(ctx, nil)
		return driver.Grant{}, fmt.Errorf("lease lost while acquiring: %w", lockswap.ErrUnavailable)
	}
	c.Data = e
	lk.locks[e] = struct{}{}
	lk.wg.Add(1)
	e.watchTimer = time.AfterFunc(WatchDelay, e.watch)
	lk.mu.Unlock()
	if ct.claimKey != "" {
		return driver.Grant{Fence: uint64(ct.claimRev), Slot: ct.permitSlot, Deadline: deadline}, nil
	}
	return driver.Grant{Fence: uint64(rev), Deadline: deadline}, nil
}

// forget drops e from the Locker's and the lease's books; it runs once per
// lock, when its watch ends or is cancelled before it started.
func (lk *Locker) forget(e *entry) {
	lk.mu.Lock()
	delete(lk.locks, e)
	lk.mu.Unlock()
	e.ls.remove(e)
	e.ls.done()
	lk.wg.Done()
}

// WatchDelay is how long a held lock waits before it watches its key. A
// lock released sooner costs no watch at all; a deletion by someone else in
// the meantime is still seen, since the watch starts at the revision after
// the acquisition.
const WatchDelay = 20 * time.Millisecond
