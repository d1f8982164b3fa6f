package redlock_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// The two ways a counter lost soon after a key's last fence broke Redlock
// fencing before the seed of a missing counter led the servers' clocks by
// redisscript.FenceGuessAhead (issue 29: each reproduced 4 runs of 4).
// Then a guessed fence could be up to 20 ms ahead of the servers' clocks
// while a lost counter was seeded at the clock itself, so a loss within
// 20 ms of the last fence let a later acquisition get a fence at or below
// one issued before it. Now every fence is at most the clock + 20 ms when
// issued and every seed is the clock + 20 ms when seeded, so a counter
// lost at any moment after a fence is seeded above it (the masters here
// share one clock). Both tests run with a client whose clock is 14 ms
// fast, within what the docs call harmless.

// loseCounters deletes key's fence counter on the first two of the three
// masters and pauses the third (SIGSTOP) until the test ends: the Locker
// then has a majority only of masters that lost the counter.
func loseCounters(t *testing.T, raws []*goredis.Client, srvs []*testserver.Redis, key string) {
	t.Helper()
	for _, rc := range raws[:2] {
		if err := rc.Del(context.Background(), redlock.FenceKey(key)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srvs[2].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srvs[2].Resume)
}

// fencedCycle takes key with lk (TryAcquire), releases it and returns its
// fence.
func fencedCycle(t *testing.T, lk *redlock.Locker, key string) uint64 {
	t.Helper()
	ctx := ctxT(t)
	l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	f := fenceOf(t, l)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

// fastClock returns a clock d ahead of this host's.
func fastClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// TestFenceLossKeepsOrder: Locker B takes key w; 50 ms later Locker A,
// whose clock is 14 ms fast, takes and releases it; the counter is then
// lost on a majority (deleted on two masters, the third paused). B's next
// acquisition, which starts after A's returned, must get a fence above
// A's. (Before: B's fence was 7.5–12.5 ms below A's.)
func TestFenceLossKeepsOrder(t *testing.T) {
	addrs, srvs := realN(t, 3)
	raws := rawClients(t, addrs)
	a := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true})
	b := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true})
	redlock.SetGuessClock(a, fastClock(14*time.Millisecond))
	fb0 := fencedCycle(t, b, "w")
	waitClock(t, uint64(time.Now().Add(50*time.Millisecond).UnixMicro()))
	fa := fencedCycle(t, a, "w")
	if fa <= fb0 {
		t.Fatalf("A's fence %d is not above B's earlier %d", fa, fb0)
	}
	loseCounters(t, raws, srvs, "w")
	fb := fencedCycle(t, b, "w")
	if fb <= fa {
		t.Fatalf("B acquired after A returned but got fence %d, not above A's %d (%d µs below): order broken by the counter's loss", fb, fa, fa-fb)
	}
}

// TestFenceLossKeepsUnique: Locker B, whose clock is 14 ms fast, takes key
// u; Locker A takes it right after (its fence one above B's); the counter
// is then lost on a majority. B's next acquisition must not get A's fence
// (before: B's guess, its last fence plus one, was accepted on the two
// re-seeded masters, and B returned the fence A held).
func TestFenceLossKeepsUnique(t *testing.T) {
	addrs, srvs := realN(t, 3)
	raws := rawClients(t, addrs)
	a := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true})
	b := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true})
	redlock.SetGuessClock(b, fastClock(14*time.Millisecond))
	fb0 := fencedCycle(t, b, "u")
	fa := fencedCycle(t, a, "u")
	if fa <= fb0 {
		t.Fatalf("A's fence %d is not above B's earlier %d", fa, fb0)
	}
	loseCounters(t, raws, srvs, "u")
	fb := fencedCycle(t, b, "u")
	if fb == fa || fb == fb0 {
		t.Fatalf("B got fence %d again after the counter's loss (A: %d, B before: %d): uniqueness broken", fb, fa, fb0)
	}
	if fb < fa {
		t.Fatalf("B acquired after A returned but got fence %d, below A's %d", fb, fa)
	}
}
