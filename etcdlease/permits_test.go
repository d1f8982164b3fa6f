package etcdlease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestSemaphoreConformance: etcdlease's counting semaphores pass the
// semaphore suite (which runs the whole mutex suite on permits of limit
// 1 too).
func TestSemaphoreConformance(t *testing.T) {
	srv := testserver.EtcdT(t)
	conformance.RunSemaphore(t, conformance.Harness{
		NewLocker:  func(t *testing.T) lockswap.Locker { return openT(t, srv.Endpoints(), "sem/") },
		TTL:        time.Second,
		Expire:     expire,
		Goroutines: []string{"go.etcd.io/etcd/client/v3"},
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "sem/", TTL: ttl})
			if err != nil {
				return nil, err
			}
			return lk, nil
		},
	})
}

// TestPermitKeys: a permit is a queue key whose value carries the limit
// and a slot key on the same lease whose value names the queue key; the
// fast path (an empty queue) takes slot 0 in the request that joins, and
// a release deletes both keys.
func TestPermitKeys(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "pk/")
	cli := lk.Client()
	ctx := context.Background()
	a, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []lockswap.Lock{a, b} {
		key, _ := EtcdKey(l)
		slot, _ := lockswap.Slot(l)
		g, err := cli.Get(ctx, key)
		if err != nil || len(g.Kvs) != 1 {
			t.Fatalf("queue key %s: %v %v", key, g, err)
		}
		if v := string(g.Kvs[0].Value); v != PermitValuePrefix+"3 "+l.Token() {
			t.Errorf("permit %d: queue value %q, want the limit and the token", i, v)
		}
		sk := lk.SlotPrefix("pool") + string(rune('0'+slot))
		s, err := cli.Get(ctx, sk)
		id := strings.TrimPrefix(key, lk.QueuePrefix("pool"))
		if err != nil || len(s.Kvs) != 1 || string(s.Kvs[0].Value) != id || s.Kvs[0].Lease != g.Kvs[0].Lease {
			t.Fatalf("permit %d: slot key %s = %v, %v; want the queue key's name without the prefix (%s), on its lease", i, sk, s.Kvs, err, id)
		}
		if f, _ := l.Fence(); int64(f) != s.Kvs[0].ModRevision {
			t.Errorf("permit %d: fence %d, want the revision that wrote the slot key, %d", i, f, s.Kvs[0].ModRevision)
		}
	}
	if slot, _ := lockswap.Slot(a); slot != 0 {
		t.Errorf("the first permit took slot %d, want 0", slot)
	}
	for _, l := range []lockswap.Lock{a, b} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	g, err := cli.Get(ctx, "pk/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(g.Kvs) != 0 {
		t.Errorf("after the releases %d keys are left under the prefix (%v)", len(g.Kvs), err)
	}
}

// TestPermitWaitIsWoken: Acquire of a permit waits on a watch, not by
// polling: etcdlease's default retry policy never retries, so a waiter
// that polled would fail with ErrHeld; it gets the permit when the holder
// releases, in the holder's slot, with a higher fence.
func TestPermitWaitIsWoken(t *testing.T) {
	srv := testserver.EtcdT(t)
	a, b := openT(t, srv.Endpoints(), "pw/"), openT(t, srv.Endpoints(), "pw/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	one := lockswap.WithPermits(1)
	la, err := a.TryAcquire(ctx, "k", one)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan lockswap.Lock, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, "k", one)
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	// Wait (bounded) until b's queue key is there, behind a's.
	for {
		g, err := a.Client().Get(ctx, a.QueuePrefix("k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if g.Count == 2 {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("the waiter ended before the release: %v (a poller with NoRetry would)", err)
		case <-ctx.Done():
			t.Fatal("the waiter never joined the queue")
		case <-time.After(5 * time.Millisecond):
		}
	}
	fa, _ := la.Fence()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		fb, _ := l.Fence()
		if slot, _ := lockswap.Slot(l); slot != 0 || fb <= fa {
			t.Errorf("the waiter got slot %d fence %d; want slot 0 and a fence above %d", slot, fb, fa)
		}
		l.Release(ctx)
	case err := <-errc:
		t.Fatalf("the waiter failed: %v", err)
	}
}

// TestPermitMixRefused: a mutex behind permits, and permits behind a
// mutex or behind permits of another limit, are refused with ErrInvalid
// naming the reason, by TryAcquire and by Acquire, and leave no key.
func TestPermitMixRefused(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "mix/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	count := func() int64 {
		g, err := lk.Client().Get(ctx, "mix/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return g.Count
	}
	p, err := lk.TryAcquire(ctx, "a", lockswap.WithPermits(2))
	if err != nil {
		t.Fatal(err)
	}
	m, err := lk.TryAcquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	before := count()
	for _, c := range []struct {
		key, want string
		opts      []lockswap.Option
	}{
		{"a", "counting semaphore", nil},
		{"a", "limit 2", []lockswap.Option{lockswap.WithPermits(3)}},
		{"b", "mutex", []lockswap.Option{lockswap.WithPermits(2)}},
	} {
		for _, try := range []bool{true, false} {
			call := lk.Acquire
			if try {
				call = lk.TryAcquire
			}
			_, err := call(ctx, c.key, c.opts...)
			if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s with %d options (try %v): err = %v, want ErrInvalid naming %q", c.key, len(c.opts), try, err, c.want)
			}
		}
	}
	if n := count(); n != before {
		t.Errorf("the refused calls left %d keys, want the %d of the two holders", n, before)
	}
	p.Release(ctx)
	m.Release(ctx)
}

// TestHugePermitKey: a permit's key whose queue prefix is at
// MaxPermitPrefixBytes works (its largest request stays within etcd's
// request limit), one byte more is refused with ErrInvalid before
// anything is sent, and a mutex on such a key still works.
func TestHugePermitKey(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "hugep/")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fits := strings.Repeat("k", MaxPermitPrefixBytes-len(lk.QueuePrefix("")))
	two := lockswap.WithPermits(2)
	a, err := lk.TryAcquire(ctx, fits, two)
	if err != nil {
		t.Fatalf("a permit whose queue prefix is at the limit: %.300v", err)
	}
	// The second goes through the slower path: the queue is not empty.
	b, err := lk.Acquire(ctx, fits, two)
	if err != nil {
		t.Fatalf("a second permit of the largest key: %.300v", err)
	}
	if _, err := lk.TryAcquire(ctx, fits); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("the mutex of the largest permit key: %.300v, want ErrInvalid (a semaphore's)", err)
	}
	a.Release(ctx)
	b.Release(ctx)
	for _, call := range []func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error){lk.TryAcquire, lk.Acquire} {
		if _, err := call(ctx, fits+"k", two); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "MaxPermitPrefixBytes") {
			t.Errorf("a permit one byte over the limit: %.300v, want ErrInvalid naming MaxPermitPrefixBytes", err)
		}
	}
	m, err := lk.TryAcquire(ctx, fits+"k")
	if err != nil {
		t.Fatalf("the mutex of a key too long for permits: %.300v", err)
	}
	m.Release(ctx)
}

// TestPermitBehindConcurrencyMutex: a permit contender that joins behind
// etcd's own concurrency.Mutex (waiting behind held permits) is refused
// with ErrInvalid, and the Mutex gets the key once the permits are
// released: the two never hold at once.
func TestPermitBehindConcurrencyMutex(t *testing.T) {
	lk, ctx, a, b := bothPermits(t, "cm/")
	two := lockswap.WithPermits(2)
	sess, err := concurrency.NewSession(lk.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	m := concurrency.NewMutex(sess, lk.QueuePrefix("k"))
	locked := make(chan error, 1)
	go func() { locked <- m.Lock(ctx) }()
	for { // wait (bounded) for the Mutex's key in the queue
		g, err := lk.Client().Get(ctx, lk.QueuePrefix("k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if g.Count == 3 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := lk.Acquire(ctx, "k", two); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("a permit behind the Mutex: err = %v, want ErrInvalid", err)
	}
	a.Release(ctx)
	b.Release(ctx)
	if err := <-locked; err != nil {
		t.Fatalf("the Mutex after the permits: %v", err)
	}
	m.Unlock(ctx)
}

// TestOrphanSlotTakenOver: a permit whose queue key someone else deleted
// is lost and deletes its slot key; a slot key left behind all the same
// (its holder's delete failed: planted here) is taken over by the next
// contender, and the lost holder's Release leaves the new holder's slot
// alone.
func TestOrphanSlotTakenOver(t *testing.T) {
	lk, ctx, a, b := bothPermits(t, "orph/")
	two := lockswap.WithPermits(2)
	key, _ := EtcdKey(a)
	if _, err := lk.Client().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	<-a.Done() // the watch sees the deletion
	slotA, _ := lockswap.Slot(a)
	sk := lk.SlotPrefix("k") + string(rune('0'+slotA))
	for { // the lost permit deletes its slot key (bounded by ctx)
		g, err := lk.Client().Get(ctx, sk)
		if err != nil {
			t.Fatalf("the lost permit's slot key %s was not deleted: %v", sk, err)
		}
		if len(g.Kvs) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// An orphan: a slot key whose holder's queue key does not exist.
	if _, err := lk.Client().Put(ctx, sk, "0123456789abcdef-99"); err != nil {
		t.Fatal(err)
	}
	c, err := lk.TryAcquire(ctx, "k", two)
	if err != nil {
		t.Fatalf("a permit while one slot is orphaned: %v", err)
	}
	if s, _ := lockswap.Slot(c); s != slotA {
		t.Errorf("the new permit took slot %d, want the orphaned slot %d", s, slotA)
	}
	fa, _ := a.Fence()
	if fc, _ := c.Fence(); fc <= fa {
		t.Errorf("the new holder of slot %d has fence %d, not above the old holder's %d", slotA, fc, fa)
	}
	if err := a.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("the old holder's Release: %v, want ErrLost", err)
	}
	if g, err := lk.Client().Get(ctx, sk); err != nil || len(g.Kvs) != 1 {
		t.Errorf("after the old holder's Release the new holder's slot key is %v (%v), want it kept", g.Kvs, err)
	}
	b.Release(ctx)
	c.Release(ctx)
}

// bothPermits opens a Locker on a new etcd with prefix and takes both
// permits of limit 2 of key "k": the locks, and a context bounded for the
// test.
func bothPermits(t *testing.T, prefix string) (*Locker, context.Context, lockswap.Lock, lockswap.Lock) {
	t.Helper()
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	var ls []lockswap.Lock
	for range 2 {
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithPermits(2))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return lk, ctx, ls[0], ls[1]
}

// TestClaimRereadsStaleHolders: a contender whose predecessor P (read as
// live, holding slot 0) loses its queue key while the contender claims,
// as another contender R behind it takes slot 1, reads the queue again
// when no slot looks free, and takes P's orphaned slot: it never gives up
// with "no free slot" while one is free.
func TestClaimRereadsStaleHolders(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "stale/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := lk.Client()
	c := &driver.Claim[*entry]{Key: "k", Token: "tok", TTL: 5 * time.Second, Permits: 2}
	pfx, slots := lk.QueuePrefix("k"), lk.SlotPrefix("k")
	for k, v := range map[string]string{pfx + "P": PermitValuePrefix + "2 p", slots + "0": "P"} {
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	ct, resp, err := lk.join(ctx, c, nil, func(txn clientv3.Txn, ct *contender, put clientv3.Op) clientv3.Txn {
		return txn.Then(put, clientv3.OpGet(ct.pfx, predOpts(2, 0)...), clientv3.OpGet(slots, clientv3.WithPrefix()))
	})
	if err != nil {
		t.Fatal(err)
	}
	kvs, taken := resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs
	// Meanwhile P's queue key is deleted, and R, behind us, takes slot 1.
	for _, op := range []clientv3.Op{clientv3.OpDelete(pfx + "P"), clientv3.OpPut(pfx+"R", PermitValuePrefix+"2 r"), clientv3.OpPut(slots+"1", "R")} {
		if _, err := cli.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	g, err := lk.claimSlot(ctx, c, ct, resp.Header.Revision, kvs[1:], taken, nil)
	if err != nil || g.Slot != 0 {
		t.Fatalf("claim with P's slot orphaned: slot %d, %v; want slot 0", g.Slot, err)
	}
	if err := (drv{lk}).Release(ctx, c); err != nil {
		t.Errorf("release: %v", err)
	}
}
