package etcdlease

import (
	"bytes"
	"context"
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
	switch {
	case c.Permits > 0:
		return PermitValuePrefix + strconv.Itoa(c.Permits) + " " + c.Token
	case c.RW == lockswap.ReadHold:
		return ReadValuePrefix + c.Token
	case c.RW == lockswap.WriteHold:
		return WriteValuePrefix + c.Token
	}
	return c.Token
}

// queueKind is what a queue key is a contender for.
type queueKind uint8

const (
	kindMutex  queueKind = iota // a bare token, or any value that is not lockswap's below
	kindPermit                  // PermitValuePrefix
	kindRead                    // ReadValuePrefix
	kindWrite                   // WriteValuePrefix
)

// kindOf reads a queue key's value: its kind, and a permit's limit.
func kindOf(v []byte) (queueKind, int) {
	switch {
	case bytes.HasPrefix(v, []byte(ReadValuePrefix)):
		return kindRead, 0
	case bytes.HasPrefix(v, []byte(WriteValuePrefix)):
		return kindWrite, 0
	}
	rest, ok := bytes.CutPrefix(v, []byte(PermitValuePrefix))
	if !ok {
		return kindMutex, 0
	}
	n, _, _ := bytes.Cut(rest, []byte(" "))
	limit, err := strconv.Atoi(string(n))
	if err != nil {
		return kindMutex, 0
	}
	return kindPermit, limit
}

// kindOfClaim is the kind of c's queue key.
func kindOfClaim(c *driver.Claim[*entry]) queueKind {
	switch {
	case c.Permits > 0:
		return kindPermit
	case c.RW == lockswap.ReadHold:
		return kindRead
	case c.RW == lockswap.WriteHold:
		return kindWrite
	}
	return kindMutex
}

// kindNames name a key's kind in a refusal.
var kindNames = [...]string{kindMutex: "a mutex's", kindPermit: "a counting semaphore's", kindRead: "a read-write lock's", kindWrite: "a read-write lock's"}

// firstOpts read the first n keys of a queue.
func firstOpts(n int) []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(n))}
}

// mixed is the refusal of a contender of kind want (with limit, for a
// permit) whose queue holds keys of another kind or limit among kvs (the
// first ones), or nil. Read and write holds are one kind.
func mixed(kvs []*mvccKV, own string, want queueKind, limit int) error {
	for _, kv := range kvs {
		if string(kv.Key) == own {
			continue
		}
		k, other := kindOf(kv.Value)
		switch {
		case k == kindPermit && want == kindPermit && other != limit:
			return fmt.Errorf("limit %d, but the key's permits are held or waited for with limit %d: %w", limit, other, lockswap.ErrInvalid)
		case k == want || k >= kindRead && want >= kindRead:
		case k == kindPermit:
			return fmt.Errorf("the key is a counting semaphore's (limit %d), not %s: %w", other, kindNames[want], lockswap.ErrInvalid)
		default:
			return fmt.Errorf("the key is %s, held or waited for, not %s: %w", kindNames[k], kindNames[want], lockswap.ErrInvalid)
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
// (wait true: it waits, woken by the deletion of one of the limit keys
// just before its own, until fewer than limit are before it). When the
// queue is empty, one transaction puts the queue key and takes slot 0
// (free: every live slot key has a queue key beside it); otherwise the
// same transaction reads the limit keys before ours and the slot keys,
// and a second one claims a slot (claimSlot). Its errors are not wrapped
// with the context's (the kit does that once).
func (lk *Locker) permit(ctx context.Context, c *driver.Claim[*entry], ob *driver.Outage, wait bool) (driver.Grant, error) {
	n, slots := c.Permits, lk.SlotPrefix(c.Key)
	if size := len(lk.QueuePrefix(c.Key)); size > MaxPermitPrefixBytes {
		return driver.Grant{}, fmt.Errorf("key too large for a permit: its queue prefix is %d bytes, the most for a permit is %d (MaxPermitPrefixBytes): %w",
			size, MaxPermitPrefixBytes, lockswap.ErrInvalid)
	}
	ct, resp, err := lk.join(ctx, c, ob, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		ct.claimKey = slots + "0" // a give-back deletes it if it is ours
		return txn.If(clientv3.Compare(clientv3.CreateRevision(ct.pfx), "=", 0).WithPrefix()).
			Then(put, clientv3.OpPut(ct.claimKey, ct.id(), clientv3.WithLease(ct.ls.id))).
			Else(put, clientv3.OpGet(ct.pfx, predOpts(n, 0)...), clientv3.OpGet(slots, clientv3.WithPrefix()))
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
	for {
		if len(kvs) == 0 || string(kvs[0].Key) != ct.key || kvs[0].CreateRevision != myRev {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("queue entry vanished while waiting (lease lost): %w", lockswap.ErrUnavailable)
		}
		preds := kvs[1:]
		// Checked at every read: a key of the mutex (or of another
		// limit) further back may have come this close meanwhile.
		if err := mixed(preds, ct.key, kindPermit, n); err != nil {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, err
		}
		switch {
		case len(preds) < n:
			return lk.claimSlot(ctx, c, ct, myRev, preds, taken, ob)
		case !wait:
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("all %d permits held: %w", n, lockswap.ErrHeld)
		}
		if err := lk.waitQueue(ctx, ct, myRev, header, preds, ob); err != nil {
			return driver.Grant{}, lk.waitEnded(ctx, ct, err)
		}
		rctx, cancel := lk.reqCtx(ctx, ob)
		g, err := lk.c.Txn(rctx).Then(clientv3.OpGet(ct.pfx, predOpts(n, myRev)...), clientv3.OpGet(slots, clientv3.WithPrefix())).Commit()
		cancel()
		if err != nil {
			ct.giveBack(ctx, nil) // our key exists: it was put before
			return driver.Grant{}, lk.fail(err)
		}
		ob.Answered()
		kvs, taken, header = g.Responses[0].GetResponseRange().Kvs, g.Responses[1].GetResponseRange().Kvs, g.Header.Revision
	}
}

// predOpts read a queue key created at myRev (0: the newest key) and the
// limit keys just before it, newest first.
func predOpts(limit int, myRev int64) []clientv3.OpOption {
	o := []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(int64(limit) + 1)}
	if myRev > 0 {
		o = append(o, clientv3.WithMaxCreateRev(myRev))
	}
	return o
}

// claimSlot takes a slot for ct, which has fewer than limit keys before it
// (preds: all of them), per taken (the slot keys as last read), in one
// transaction: a slot without a key is created if it is still absent; a
// slot whose holder's queue key is gone (an orphan: the holder's key was
// deleted by someone else, and its Release could not remove the slot) is
// taken over if its holder's key is still absent. Both also need ct's key
// still there. Contenders that become eligible together choose among the
// free slots by their rank (how many of their predecessors have no slot
// yet), so that they rarely race for one. Slots are never all taken: every
// slot key belongs to one of the first limit contenders, ct among them,
// or is an orphan.
func (lk *Locker) claimSlot(ctx context.Context, c *driver.Claim[*entry], ct *contender, myRev int64, preds, taken []*mvccKV, ob *driver.Outage) (driver.Grant, error) {
	slots := lk.SlotPrefix(c.Key)
	own := clientv3.Compare(clientv3.CreateRevision(ct.key), "=", myRev)
	var live map[string]bool // contenders known to be in the queue
	known := func(preds []*mvccKV) {
		live = map[string]bool{ct.id(): true}
		for _, kv := range preds {
			live[strings.TrimPrefix(string(kv.Key), ct.pfx)] = true
		}
	}
	known(preds)
	for reread := false; ; {
		s, holder, ok := pickSlot(taken, slots, c.Permits, live)
		if !ok && !reread {
			// A contender thought live may have lost its key meanwhile,
			// orphaning its slot: read the queue and the slots again.
			reread = true
			rctx, cancel := lk.reqCtx(ctx, ob)
			g, err := lk.c.Txn(rctx).Then(clientv3.OpGet(ct.pfx, predOpts(c.Permits, myRev)...), clientv3.OpGet(slots, clientv3.WithPrefix())).Commit()
			cancel()
			if err != nil {
				ct.giveBack(ctx, nil)
				return driver.Grant{}, lk.fail(err)
			}
			ob.Answered()
			kvs := g.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 || string(kvs[0].Key) != ct.key {
				ct.giveBack(ctx, nil)
				return driver.Grant{}, fmt.Errorf("queue entry vanished while taking a slot (lease lost): %w", lockswap.ErrUnavailable)
			}
			known(kvs[1:])
			taken = g.Responses[1].GetResponseRange().Kvs
			continue
		}
		if !ok {
			ct.giveBack(ctx, nil)
			return driver.Grant{}, fmt.Errorf("no free slot among %d (%s): %w", c.Permits, lockstate.QuoteKey(slots), lockswap.ErrUnavailable)
		}
		reread = false
		k := slots + strconv.Itoa(s)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0), own}
		if holder != "" {
			cmps = []clientv3.Cmp{clientv3.Compare(clientv3.Value(k), "=", holder),
				clientv3.Compare(clientv3.CreateRevision(ct.pfx+holder), "=", 0), own}
		}
		ct.claimKey = k // from here a give-back deletes the slot key too, if it is ours
		ct.start = time.Now()
		rctx, cancel := lk.reqCtx(ctx, ob)
		resp, err := lk.c.Txn(rctx).If(cmps...).
			Then(clientv3.OpPut(k, ct.id(), clientv3.WithLease(ct.ls.id))).
			Else(clientv3.OpGet(slots, clientv3.WithPrefix()), clientv3.OpGet(ct.key, clientv3.WithKeysOnly()),
				clientv3.OpGet(ct.pfx+holder, clientv3.WithKeysOnly())).
			Commit()
		cancel()
		if err != nil {
			ct.giveBack(ctx, nil)
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
		if holder != "" && len(resp.Responses[2].GetResponseRange().Kvs) > 0 {
			live[holder] = true // a contender behind us, eligible too
		}
		taken = resp.Responses[0].GetResponseRange().Kvs
	}
}

// pickSlot chooses a slot below limit per taken (the keys under the slot
// prefix slots) and live (the contenders known to be in the queue): one
// without a key, or one whose holder (its value) is not known to be live,
// then holder is that value. Of the free slots it takes the one at the
// caller's rank, the number of live contenders without a slot (the
// caller's predecessors that claim as it does), or the last one.
func pickSlot(taken []*mvccKV, slots string, limit int, live map[string]bool) (slot int, holder string, ok bool) {
	owner := make(map[int]string, len(taken))
	holding := map[string]bool{}
	for _, kv := range taken {
		if s, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), slots)); err == nil && s < limit {
			owner[s] = string(kv.Value)
			holding[string(kv.Value)] = true
		}
	}
	rank := 0
	for id := range live {
		if !holding[id] {
			rank++
		}
	}
	rank-- // the caller itself has no slot
	var free []int
	for s := range limit {
		if v, ok := owner[s]; !ok || !live[v] {
			free = append(free, s)
		}
	}
	if len(free) == 0 {
		return 0, "", false
	}
	slot = free[min(max(rank, 0), len(free)-1)]
	return slot, owner[slot], true
}

// waitQueue waits until one of preds (the keys before ct's, created at
// myRev, as read at revision rev) or ct's own key is deleted: it watches
// the queue prefix for deletions from now and looks only at those keys',
// reads them once (a deletion before the watch began), and again on each
// probe tick, which also tells a long wait from an etcd that no longer
// answers (ended with ErrUnavailable once the outage bound has passed).
// Other deletions (waiters behind, or ahead of preds) cost no request.
func (lk *Locker) waitQueue(ctx context.Context, ct *contender, myRev, rev int64, preds []*mvccKV, ob *driver.Outage) error {
	watched := make(map[string]bool, len(preds)+1)
	watched[ct.key] = true
	for _, kv := range preds {
		watched[string(kv.Key)] = true
	}
	check := func() (bool, int64, error) {
		rctx, cancel := lk.reqCtx(ctx, ob)
		g, err := lk.c.Get(rctx, ct.pfx, append(predOpts(len(preds), myRev), clientv3.WithKeysOnly())...)
		cancel()
		if err != nil {
			return false, 0, err
		}
		ob.Answered()
		if len(g.Kvs) != len(preds)+1 {
			return true, g.Header.Revision, nil
		}
		for _, kv := range g.Kvs {
			if !watched[string(kv.Key)] {
				return true, g.Header.Revision, nil
			}
		}
		return false, g.Header.Revision, nil
	}
	relevant := func(k []byte) bool { return watched[string(k)] }
	return lk.waitDeletions(ctx, ct.pfx, rev, check, relevant, ob, clientv3.WithPrefix())
}
