package singleredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/fencetest"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestFenceCountersExpire: every path that gives a fence (the fenced
// acquire, a hand-over to a local waiter, the fair wait's hand-over) sets
// the counter's expiry (FenceCounterTTL); fenced locks on 10,000 distinct
// names leave no key behind once their counters' life (here 300 ms) has
// passed, and a name taken again after its counter expired gets a fence
// above every fence given before.
func TestFenceCountersExpire(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })

	t.Run("every path", func(t *testing.T) {
		const life = time.Minute // long enough to be seen on a loaded machine
		singleredis.SetFenceCounterTTL(t, life)
		defer raw.FlushDB(ctx)
		plain, err := lk.TryAcquire(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		plain.Release(ctx)
		fair := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: true})
		held, err := fair.Acquire(ctx, "fair")
		if err != nil {
			t.Fatal(err)
		}
		waiter := acquireAsync(ctx, fair, "fair")
		waitFor(t, 5*time.Second, "the fair waiter registered", func() bool { return queued(raw, "fair") == 1 })
		raw.Del(ctx, singleredis.FenceKey("fair")) // the hand-over below must set it again
		held.Release(ctx)                          // hands the key to the waiter
		if r := <-waiter; r.err != nil {
			t.Fatal(r.err)
		} else {
			r.l.Release(ctx)
		}
		local, err := lk.Acquire(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		// Parked after its first attempt, with no retry of its own to
		// come: the release below hands it the lock.
		next := queuetest.QueueBehind(t, ctx, lk, "local", lockswap.DefaultTTL)
		raw.Del(ctx, singleredis.FenceKey("local")) // the hand-over below must set it again
		local.Release(ctx)                          // hands the lock over in one request
		if r := <-next; r.Err != nil {
			t.Fatal(r.Err)
		} else {
			r.Lock.Release(ctx)
		}
		for _, k := range []string{"plain", "fair", "local"} {
			if d := raw.PTTL(ctx, singleredis.FenceKey(k)).Val(); d <= 0 || d > life {
				t.Errorf("fence counter of %q lives %v, want an expiry within %v", k, d, life)
			}
		}
	})

	t.Run("10000 names", func(t *testing.T) {
		const life = 300 * time.Millisecond
		singleredis.SetFenceCounterTTL(t, life)
		highest := fencetest.TakeNames(t, ctx, lk, 10000, 8)
		if t.Failed() {
			return
		}
		// No key left once the counters' life has passed.
		waitFor(t, 10*time.Second, "every key gone", func() bool { return raw.DBSize(ctx).Val() == 0 })
		// A name taken again, its counter gone: the fence comes from the
		// server's clock, above every fence given before.
		l, err := lk.TryAcquire(ctx, "entity-0", lockswap.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if f, _ := l.Fence(); f <= highest {
			t.Errorf("fence %d after the counter expired, want above %d, the highest given before", f, highest)
		}
	})
}
