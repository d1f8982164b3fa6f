package etcdlease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// Counting semaphores (lockswap.WithPermits) use the mutex's queue: each
// contender puts its key under the lock's queue prefix, attached to its
// lease, with the value PermitValuePrefix + limit + " " + token (the
// mutex's value is the bare token). The limit contenders with the lowest
// create revisions may hold a permit; each of them then claims a slot: a
// key under SlotPrefix, slot number appended, created only if absent, on
// the same lease, whose value is the contender's key. A slot's key goes
// with its holder's key, in the same transaction (Release, the deletion at
// the deadline) or with their lease, so every slot key belongs to one of
// the first limit contenders, and at most limit permits are held.
//
// A permit's fence is the revision of the transaction that claimed its
// slot: the previous holder's slot key was deleted before, so a slot's
// fence rises with every holder, and fences never repeat across slots,
// limits and the key's mutex (whose fence is its key's create revision).
// Waiters watch the queue prefix for deletions (no polling) and count the
// contenders before them again at each one.
//
// A contender whose queue has, among the first limit keys, one of a mutex
// or of another limit is refused with lockswap.ErrInvalid and removes its
// key; so is a mutex contender whose predecessor is a permit's.

// mvccKV is a key and value as etcd returns them.
type mvccKV = mvccpb.KeyValue

// PermitValuePrefix starts the value of a permit's queue key, followed by
// the limit, a space and the holder's token.
const PermitValuePrefix = "lockswap-permits "

// SlotPrefix returns the prefix of the slot keys of the counting
// semaphore key: Options.Prefix + escape(key) + "%slots/". escape never
// makes "%s", so no lock's queue prefix contains it and it contains none.
func (lk *Locker) SlotPrefix(key string) string {
	return lk.opts.Prefix + escaper.Replace(key) + "%slots/"
}

// contenderValue is the value of c's queue key.
func contenderValue(c *driver.Claim[*entry]) string {
	if c.Permits == 0 {
		return c.Token
	}
	return PermitValuePrefix + strconv.Itoa(c.Permits) + " " + c.Token
}

// permitLimit reads a queue key's value: the limit of a permit's, and
// false for a mutex's (any other value).
func permitLimit(v []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(v, []byte(PermitValuePrefix))
	if !ok {
		return 0, false
	}
	n, _, _ := bytes.Cut(rest, []byte(" "))
	limit, err := strconv.Atoi(string(n))
	return limit, err == nil
}

// firstOpts read the first n keys of a queue, up to our own create
// revision myRev (0: all).
func firstOpts(n int, myRev int64) []clientv3.OpOption {
	o := []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(n))}
	if myRev > 0 {
		o = append(o, clientv3.WithMaxCreateRev(myRev))
	}
	return o
}

// mixed is the refusal of a contender whose queue holds keys of another
// kind or limit among kvs (the first ones), or nil.
func mixed(kvs []*mvccKV, own string, limit int) error {
	for _, kv := range kvs {
		if string(kv.Key) == own {
			continue
		}
		other, isPermit := permitLimit(kv.Value)
		switch {
		case !isPermit && limit > 0:
			return fmt.Errorf("the key's mutex is held or waited for, not a counting semaphore's permits: %w", lockswap.ErrInvalid)
		case isPermit && limit == 0:
			return fmt.Errorf("the key is a counting semaphore's (limit %d), not a mutex's: %w", other, lockswap.ErrInvalid)
		case isPermit && other != limit:
			return fmt.Errorf("limit %d, but the key's permits are held or waited for with limit %d: %w", limit, other, lockswap.ErrInvalid)
		}
	}
	return nil
}

// tryPermit is TryAcquire's attempt at a permit.
func (lk *Locker) tryPermit(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage) (driver.Grant, error) {
	return lk.permit(ctx, c, ob, false)
}

// waitPermit is Acquire's attempt at a permit.
func (lk *Locker) waitPermit(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage) (driver.Grant, error) {
	return lk.permit(ctx, c, ob, true)
}

// permit makes one attempt at one of c.Permits permits: TryAcquire's
// (wait false: ErrHeld when limit contenders are before it) or Acquire's
// (wait true: it waits, woken by deletions in the queue, until fewer than
// limit are). When the queue is empty, one transaction puts the queue key
// and takes slot 0 (free: every slot key has a queue key beside it);
// otherwise the same transaction reads the first limit keys of the queue
// and the slot keys, and a second one claims a slot (claimSlot). Its
// errors are not wrapped with the context's (the kit does that once).
func (lk *Locker) permit(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage, wait bool) (driver.Grant, error) {
	n, slots := c.Permits, lk.SlotPrefix(c.Key)
	if size := len(lk.QueuePrefix(c.Key)); size > MaxPermitPrefixBytes {
		return driver.Grant{}, fmt.Errorf("key too large for a permit: its queue prefix is %d bytes, the most for a permit is %d (MaxPermitPrefixBytes): %w",
			size, MaxPermitPrefixBytes, lockswap.ErrInvalid)
	}
	ct, resp, err := lk.join(ctx, c, ob, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		ct.claimKey = slots + "0" // a give-back deletes it if it is ours
		return txn.If(clientv3.Compare(clientv3.CreateRevision(ct.pfx), "=", 0).WithPrefix()).
			Then(put, clientv3.OpPut(ct.claimKey, ct.key, clientv3.WithLease(ct.ls.id))).
			Else(put, clientv3.OpGet(ct.pfx, firstOpts(n, 0)...), clientv3.OpGet(slots, clientv3.WithPrefix()))
	})
	if err != nil {
		return driver.Grant{}, err
	}
	myRev, header := resp.Header.Revision, resp.Header.Revision
	if resp.Succeeded {
		ct.claimRev, ct.permitSlot = myRev, 0
		return ct.held(ctx, c, myRev)
	}
	ct.claimKey = ""
	kvs, taken := resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs
	if err := mixed(kvs, ct.key, n); err != nil {
		ct.giveBack(ctx, nil)
		return driver.Grant{}, err
	}
	for {
		switch {
		case firstAmong(kvs, ct.key, myRev):
			return lk.claimSlot(ctx, c, ct, myRev, taken, ob)
		case len(kvs) < n:
			// Fewer than limit keys up to ours, and ours not among them:
			// it is gone (the lease expired while we waited).
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
		case !wait:
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("all %d permits held: %w", n, lockswap.ErrHeld)
		}
		if err := lk.waitQueue(ctx, ct, myRev, header, n, ob); err != nil {
			ct.giveBack(ctx, err)
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
		rctx, cancel := lk.reqCtx(ctx, ob)
		g, err := lk.c.Txn(rctx).Then(clientv3.OpGet(ct.pfx, firstOpts(n, myRev)...), clientv3.OpGet(slots, clientv3.WithPrefix())).Commit()
		cancel()
		if err != nil {
			ct.giveBack(ctx, err)
			return driver.Grant{}, lk.fail(err)
		}
		ob.Answered()
		kvs, taken, header = g.Responses[0].GetResponseRange().Kvs, g.Responses[1].GetResponseRange().Kvs, g.Header.Revision
	}
}

// firstAmong reports whether kvs holds key, created at rev.
func firstAmong(kvs []*mvccKV, key string, rev int64) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.CreateRevision == rev {
			return true
		}
	}
	return false
}

// claimSlot takes the lowest free slot for ct, one of the first limit
// contenders, per taken (the slot keys as last read): one transaction creates the slot's key if it is absent and
// ct's key is still there; when another took that slot first, it tries
// the next free one. Slots are never all taken (every slot key belongs to
// one of the first limit contenders, ct among them).
func (lk *Locker) claimSlot(ctx context.Context, c *driver.Claim[*entry], ct *contender, myRev int64, taken []*mvccKV, ob *driver.Outage) (driver.Grant, error) {
	slots := lk.SlotPrefix(c.Key)
	own := clientv3.Compare(clientv3.CreateRevision(ct.key), "=", myRev)
	for {
		s := freeSlot(taken, slots, c.Permits)
		if s < 0 {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("no free slot among %d (%s): %w", c.Permits, lockstate.QuoteKey(slots), lockswap.ErrUnavailable)
		}
		k := slots + strconv.Itoa(s)
		ct.claimKey = k // from here a give-back deletes the slot key too, if it is ours
		ct.start = time.Now()
		rctx, cancel := lk.reqCtx(ctx, ob)
		resp, err := lk.c.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0), own).
			Then(clientv3.OpPut(k, ct.key, clientv3.WithLease(ct.ls.id))).
			Else(clientv3.OpGet(slots, clientv3.WithPrefix()), clientv3.OpGet(ct.key)).
			Commit()
		cancel()
		if err != nil {
			ct.giveBack(ctx, err)
			return driver.Grant{}, lk.fail(err)
		}
		ob.Answered()
		if resp.Succeeded {
			ct.claimRev, ct.permitSlot = resp.Header.Revision, s
			return ct.held(ctx, c, myRev)
		}
		ct.claimKey = ""
		if len(resp.Responses[1].GetResponseRange().Kvs) == 0 {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("queue entry vanished while taking a slot (lease lost): %w", lockswap.ErrUnavailable)
		}
		taken = resp.Responses[0].GetResponseRange().Kvs
	}
}

// freeSlot is the lowest slot below limit without a key among taken
// (keys under the slot prefix slots), or -1.
func freeSlot(taken []*mvccKV, slots string, limit int) int {
	used := make(map[int]bool, len(taken))
	for _, kv := range taken {
		if s, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), slots)); err == nil {
			used[s] = true
		}
	}
	for s := range limit {
		if !used[s] {
			return s
		}
	}
	return -1
}

// waitQueue waits until a key of ct's queue is deleted, or ct's key
// (created at myRev) is among the first limit: it watches the queue
// prefix for deletions from now, then reads the first keys once (a
// deletion before the watch began), and again on each probe tick, which
// also tells a long wait from an etcd that no longer answers (ended with
// ErrUnavailable once the outage bound has passed).
func (lk *Locker) waitQueue(ctx context.Context, ct *contender, myRev, rev int64, limit int, ob *driver.Outage) error {
	count := func() (bool, int64, error) {
		rctx, cancel := lk.reqCtx(ctx, ob)
		// Not WithCountOnly: etcd counts a range before it applies
		// WithMaxCreateRev, so the count would include the waiters
		// behind us.
		g, err := lk.c.Get(rctx, ct.pfx, append(firstOpts(limit, myRev), clientv3.WithKeysOnly())...)
		cancel()
		if err != nil {
			return false, 0, err
		}
		ob.Answered()
		return len(g.Kvs) < limit || firstAmong(g.Kvs, ct.key, myRev), g.Header.Revision, nil
	}
	return lk.waitDeletions(ctx, ct.pfx, rev, count, ob, clientv3.WithPrefix())
}
