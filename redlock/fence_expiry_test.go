package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/fencetest"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redlock"
)

// TestFenceCountersExpire: every script that writes a fence counter (the
// fenced acquire, its restart-safe form, the write-back round, a hand-over
// to a local waiter) sets the counter's expiry (FenceCounterTTL), also
// where it had none (an older lockswap's counter: PERSIST here); fenced
// locks on 10,000 distinct names leave no key behind on any master once
// their counters' life (here 2 s) has passed, and a name taken again
// after its counter expired gets a fence above every fence given before
// (the seed of a missing counter is the clock plus FenceGuessAhead, above
// every fence issued at an earlier clock reading).
func TestFenceCountersExpire(t *testing.T) {
	addrs, _ := realN(t, 3)
	raws := rawClients(t, addrs)
	ctx := context.Background()
	flush := func() {
		for _, rc := range raws {
			rc.FlushDB(ctx)
		}
	}

	t.Run("every path", func(t *testing.T) {
		const life = time.Minute // long enough to be seen on a loaded machine
		redlock.SetFenceCounterTTL(t, life)
		defer flush()
		// persist removes the counter's expiry on every master, so that the
		// next script must set it again.
		persist := func(key string) {
			t.Helper()
			for i, rc := range raws {
				if ok, err := rc.Persist(ctx, redlock.FenceKey(key)).Result(); err != nil || !ok {
					t.Fatalf("PERSIST of the counter of %q on instance %d: %v, %v; want its expiry removed", key, i, ok, err)
				}
			}
		}
		n := int64(len(addrs))
		// rounds checks that requests() grew by want rounds of one request
		// per instance since before: the path the comment names was taken.
		rounds := func(path string, requests func() int64, before, want int64) {
			t.Helper()
			if got := requests() - before; got != want*n {
				t.Fatalf("%s: %d requests, want %d (%d rounds)", path, got, want*n, want)
			}
		}
		check := func(path, key string) {
			t.Helper()
			for i, rc := range raws {
				if d := rc.PTTL(ctx, redlock.FenceKey(key)).Val(); d <= 0 || d > life {
					t.Errorf("%s: instance %d: the fence counter of %q lives %v, want an expiry within %v", path, i, key, d, life)
				}
			}
		}
		lk, requests := countedGoRedisLocker(t, addrs, redlock.Options{Fence: true, InstanceTimeout: time.Second})
		seedOldEpoch(t, raws) // no quarantine: the masters' epochs are old
		safe, safeRequests := countedGoRedisLocker(t, addrs, redlock.Options{Fence: true, RestartSafety: true, MaxTTL: 10 * time.Second, InstanceTimeout: time.Second})
		before := requests()
		fencedCycle(t, lk, "new") // seeds, then the write-back round
		rounds("a new key", requests, before, 3)
		check("the write-back", "new")
		persist("new")
		before = requests()
		fencedCycle(t, lk, "new") // the fast path: the guess applies
		rounds("a key taken again", requests, before, 2)
		check("the fenced acquire", "new")
		fencedCycle(t, safe, "safe")
		persist("safe")
		before = safeRequests()
		fencedCycle(t, safe, "safe") // the restart-safe script's fast path
		rounds("a key taken again, restart-safe", safeRequests, before, 2)
		check("the restart-safe fenced acquire", "safe")
		held, err := lk.Acquire(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		// The waiter's first attempt has failed and it waits between
		// attempts, with no retry of its own to come (counting from
		// "waiting", its first round could still be on its way).
		next := queuetest.QueueBehind(t, ctx, lk, "local", lockswap.DefaultTTL)
		persist("local")
		before = requests()
		if err := held.Release(ctx); err != nil { // hands the key to the waiter, its guess applied
			t.Fatal(err)
		}
		r := <-next
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if err := r.Lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		rounds("the hand-over and the waiter's release", requests, before, 2)
		check("the fenced hand-over", "local")
	})

	t.Run("10000 names", func(t *testing.T) {
		// Longer than the two rounds of a new key's acquisition take on a
		// loaded machine: a counter seeded in the acquire round that
		// expired before the write-back round is seeded again above the
		// fence computed from it, which fails the attempt (ErrHeld).
		const life = 2 * time.Second
		redlock.SetFenceCounterTTL(t, life)
		defer flush()
		// A generous fixed instance timeout: the test is about the keys
		// left behind, and 8 workers on a loaded machine with the race
		// detector answer slower than the adaptive timeout's first guess.
		lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true, InstanceTimeout: time.Second})
		highest := fencetest.TakeNames(t, ctx, lk, 10000, 8, lockswap.WithTTL(5*time.Second))
		if t.Failed() {
			return
		}
		// No key left on any master once the counters' life has passed,
		// but the open Locker's registration of its masters (MembersKey),
		// which it refreshes while open.
		left := func(allowMembers bool) bool {
			for _, rc := range raws {
				n := rc.DBSize(ctx).Val()
				if allowMembers && n == 1 && rc.Exists(ctx, redlock.MembersKey).Val() == 1 {
					continue
				}
				if n != 0 {
					return true
				}
			}
			return false
		}
		waitFor(t, "every key but the registration gone on every master", func() bool { return !left(true) })
		// A name taken again, its counters gone: seeded from the masters'
		// clocks plus 20 ms, above every fence given before.
		l, err := lk.TryAcquire(ctx, "entity-0", lockswap.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if f := fenceOf(t, l); f <= highest {
			t.Errorf("fence %d after the counter expired, want above %d, the highest given before", f, highest)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Once the Locker is closed, its registration ends with the rest.
		lk.Close()
		waitFor(t, "every key gone on every master after Close", func() bool { return !left(false) })
	})
}
