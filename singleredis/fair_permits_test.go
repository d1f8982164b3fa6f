package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestFairPermitsOrder: waiters for permits of separate Lockers with
// FairWait get them in the order they registered, by hand-over: the
// holder's releases serve the first two, and each waiter's release the
// next. The fences (the server's order of grants) follow the
// registrations, and every waiter waits without polling (its first
// request registers it, the hand-over wakes it).
func TestFairPermitsOrder(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, c := range fairClients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "permit-order:"+c.Name
			permits := lockswap.WithPermits(2)
			holder := fairLocker(t, c.New(t, srv.Addr()), singleredis.Options{Fence: true})
			var held []lockswap.Lock
			for range 2 {
				l, err := holder.Acquire(ctx, key, permits)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			const n = 4
			outs := make([]<-chan result, n)
			counts := make([]*countingSub, n)
			for i := range n {
				counts[i] = newCounting(c.New(t, srv.Addr()))
				lk := fairLocker(t, counts[i], singleredis.Options{Fence: true})
				outs[i] = acquireAsync(ctx, lk, key, permits, lockswap.WithTTL(10*time.Second))
				waitFor(t, 5*time.Second, fmt.Sprintf("waiter %d registered", i), func() bool { return queued(raw, key) == int64(i+1) })
			}
			var (
				fences []uint64
				got    []lockswap.Lock
			)
			for i := range n {
				// The holder's releases serve the first two waiters,
				// theirs the last two.
				release := held
				if i >= 2 {
					release = got
				}
				if err := release[i%2].Release(ctx); err != nil {
					t.Fatal(err)
				}
				var r result
				select {
				case r = <-outs[i]:
				case <-time.After(10 * time.Second):
					t.Fatalf("waiter %d: no permit 10 s after the permit before it was released", i)
				}
				if r.err != nil {
					t.Fatalf("waiter %d: %v", i, r.err)
				}
				got = append(got, r.l)
				f, _ := r.l.Fence()
				slot, ok := lockswap.Slot(r.l)
				if !ok || slot < 0 || slot >= 2 {
					t.Errorf("waiter %d: slot %d %v, want 0 or 1", i, slot, ok)
				}
				if tok := raw.HGet(ctx, key, fmt.Sprintf("t%d", slot)).Val(); tok != r.l.Token() {
					t.Errorf("waiter %d: slot %d holds token %q on the server, want the lock's %q", i, slot, tok, r.l.Token())
				}
				fences = append(fences, f)
			}
			for _, l := range got[2:] {
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
			for i := 1; i < n; i++ {
				if fences[i] <= fences[i-1] {
					t.Errorf("fences %v: waiters were not served in registration order", fences)
				}
			}
			for i, cc := range counts {
				// Subscribe, register; nothing else.
				if r := cc.Requests(); r > 3 {
					t.Errorf("waiter %d made %d requests, want a few (a hand-over wakes it: no polling)", i, r)
				}
			}
		})
	}
}

// TestFairPermitsNewcomerQueues: with the only permit held and waiters A
// and B queued in that order, the holder's release goes to A, and B gets
// the permit at A's release; the queue's keys and the semaphore are gone
// after that.
func TestFairPermitsNewcomerQueues(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "permit-newcomer"
	permits := lockswap.WithPermits(1)
	holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := holder.Acquire(ctx, key, permits)
	if err != nil {
		t.Fatal(err)
	}
	a := acquireAsync(ctx, fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{}), key, permits)
	waitFor(t, 5*time.Second, "A registered", func() bool { return queued(raw, key) == 1 })
	b := acquireAsync(ctx, fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{}), key, permits)
	waitFor(t, 5*time.Second, "B registered", func() bool { return queued(raw, key) == 2 })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-a:
	case <-b:
		t.Fatal("B got the permit before A, which registered first")
	case <-time.After(10 * time.Second):
		t.Fatal("A: no permit 10 s after the holder's release")
	}
	if r.err != nil {
		t.Fatalf("A: %v", r.err)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r = <-b:
	case <-time.After(10 * time.Second):
		t.Fatal("B: no permit 10 s after A's release")
	}
	if r.err != nil {
		t.Fatalf("B: %v", r.err)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := raw.Exists(ctx, key, singleredis.FairQueueKey(key), singleredis.FairWaitersKey(key)).Val(); n != 0 {
		t.Errorf("%d of the semaphore's and the queue's keys left after every permit was released", n)
	}
}

// TestFairPermitsHoldersDie: when every permit's holder dies (permits
// expire without a release), the first waiter takes one at the first
// expiry and serves the waiter behind it from the other free slot in the
// same request: both within the permits' TTL and a margin, without
// polling, though the second waiter's own next check would be seconds
// away.
func TestFairPermitsHoldersDie(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "permit-holders-die"
	const pttl = 400 * time.Millisecond
	permits := lockswap.WithPermits(2)
	dead, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	for range 2 {
		if _, err := dead.TryAcquire(ctx, key, permits, lockswap.WithTTL(pttl)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var outs []<-chan result
	for i := range 2 {
		lk := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
		outs = append(outs, acquireAsync(ctx, lk, key, permits, lockswap.WithTTL(30*time.Second)))
		waitFor(t, 5*time.Second, fmt.Sprintf("waiter %d registered", i), func() bool { return queued(raw, key) == int64(i+1) })
	}
	for i, out := range outs {
		select {
		case r := <-out:
			if r.err != nil {
				t.Fatalf("waiter %d: %v", i, r.err)
			}
			defer r.l.Release(ctx)
		case <-time.After(pttl + 5*time.Second - time.Since(start)):
			t.Fatalf("waiter %d: no permit %v after the holders' permits (%v) expired", i, 5*time.Second, pttl)
		}
	}
}

// TestFairPermitsLostWakeUp: a permit handed without its wake-up (as a
// Pub/Sub connection that broke at that moment would lose it) is found by
// the waiter's next request, with the fence and slot it was handed, at
// the first permit's expiry for the first waiter; its registration is
// gone.
func TestFairPermitsLostWakeUp(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "permit-lost"
	permits := lockswap.WithPermits(1)
	// A holder with 1 s left: the waiter registers, and the hand-over
	// below runs, before it expires.
	other, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.TryAcquire(ctx, key, permits, lockswap.WithTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	lk := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: true})
	out := acquireAsync(ctx, lk, key, permits, lockswap.WithTTL(5*time.Second))
	waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
	token, err := raw.LIndex(ctx, singleredis.FairQueueKey(key), 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The hand-over of the release script, without its PUBLISH: slot 0
	// to the waiter for 5 s, fence 12345.
	if _, err := raw.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.LPop(ctx, singleredis.FairQueueKey(key))
		p.HDel(ctx, singleredis.FairWaitersKey(key), token)
		p.HSet(ctx, singleredis.FairWaitersKey(key), "h0", token+" 12345")
		p.HSet(ctx, key, "t0", token, "e0", now.Add(5*time.Second).UnixMilli())
		p.PExpire(ctx, key, 5*time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Token() != token {
		t.Errorf("lock token %q, want the handed %q", r.l.Token(), token)
	}
	if f, ok := r.l.Fence(); !ok || f != 12345 {
		t.Errorf("fence %d %v, want the handed 12345", f, ok)
	}
	if s, ok := lockswap.Slot(r.l); !ok || s != 0 {
		t.Errorf("slot %d %v, want the handed 0", s, ok)
	}
	if n := raw.HLen(ctx, singleredis.FairWaitersKey(key)).Val(); n != 0 {
		t.Errorf("%d registrations or records left after the waiter found its permit", n)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Errorf("release of the handed permit: %v", err)
	}
}

// TestFairPermitWaiterRefusedWhenKeyBecomesMutex: a fair permit waiter
// whose key becomes a mutex's while it waits is refused with ErrInvalid
// and takes its registration out of the queue.
func TestFairPermitWaiterRefusedWhenKeyBecomesMutex(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := "permit-becomes-mutex"
	a := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if _, err := a.TryAcquire(ctx, key, lockswap.WithPermits(1), lockswap.WithTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	w := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	// A TTL of 1 s: the waiter's next check is within it.
	out := acquireAsync(ctx, w, key, lockswap.WithPermits(1), lockswap.WithTTL(time.Second))
	waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
	raw.Del(ctx, key) // the semaphore is gone (as if expired), and a mutex takes the key
	m, err := a.TryAcquire(ctx, key, lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(ctx)
	if r := <-out; !errors.Is(r.err, lockswap.ErrInvalid) {
		t.Fatalf("the waiter: err = %v, want ErrInvalid (the key is a mutex's)", r.err)
	}
	if n := raw.HLen(ctx, singleredis.FairWaitersKey(key)).Val(); n != 0 {
		t.Errorf("the refused waiter left %d registrations", n)
	}
}
