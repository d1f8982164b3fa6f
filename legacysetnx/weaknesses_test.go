package legacysetnx_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/legacysetnx"
)

// TestClockAheadStealsLiveLock shows the declared clock weakness: a client
// whose clock runs ahead sees a live lock as expired and takes it over, and
// two clients hold the lock at once.
func TestClockAheadStealsLiveLock(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	clock := &fakeClock{}
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			a := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Clock: clock.Now})
			ahead := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Clock: clock.skewed(time.Minute)})
			other := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Clock: clock.Now})
			var res fenced.Resource
			la, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			res.Enter("a")
			if _, err := other.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("a client with the same clock: err = %v, want ErrHeld", err)
			}
			lb, err := ahead.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("the client whose clock runs a minute ahead did not take the lock (%v): the weakness the Guarantees declare did not happen", err)
			}
			res.Enter("ahead")
			select {
			case <-la.Done():
				t.Fatal("the first holder was told it lost the lock; it cannot know")
			default:
			}
			if st := res.Stats(); st.Overlaps != 1 || st.MaxConcurrent != 2 {
				t.Errorf("overlap stats %+v, want the two holders counted inside at once", st)
			}
			if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("first holder's Release: %v, want ErrLost (the key holds the other timestamp)", err)
			}
			if v, _ := mr.Get("k"); v != stamp(t, lb).Value() {
				t.Errorf("the first holder's Release changed the thief's lock: %q", v)
			}
			res.Exit()
			res.Exit()
			lb.Release(ctx)
			if g := legacysetnx.Guarantees(); g.Clock != lockswap.ClockSynchronized {
				t.Errorf("Guarantees().Clock = %v; the weakness shown here must be declared", g.Clock)
			}
		})
	}
}

// TestPausedHolder: a holder paused past its timestamp is taken over while
// it still believes it holds the lock (two holders at once, counted); when
// it wakes, its Release does not remove the next holder's lock, where the
// documented plain DEL would.
func TestPausedHolder(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	clock := &fakeClock{}
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			a := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, Clock: clock.Now})
			b := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, Clock: clock.Now})
			var res fenced.Resource
			la, err := a.TryAcquire(ctx, "job", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			res.Enter("a")
			clock.Advance(11 * time.Second) // a is paused (GC, SIGSTOP) past its timestamp
			lb, err := b.TryAcquire(ctx, "job", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("takeover after the paused holder's timestamp passed: %v", err)
			}
			res.Enter("b")
			if st := res.Stats(); st.Overlaps != 1 {
				t.Errorf("overlaps = %d, want 1: both held the lock at once", st.Overlaps)
			}
			res.Exit() // a wakes, finishes, releases
			if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("woken holder's Release: %v, want ErrLost", err)
			}
			if v, _ := mr.Get("job"); v != stamp(t, lb).Value() {
				t.Fatalf("the woken holder's Release removed or changed the next holder's lock (key = %q)", v)
			}
			if err := la.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("woken holder's Extend: %v, want ErrLost", err)
			}
			// What the old clients' plain DEL would have done instead.
			mr.Del("job")
			if _, err := a.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second)); err != nil {
				t.Errorf("after a plain DEL by the stale holder the key is free (%v), which is why release compares", err)
			} else {
				t.Log("a plain DEL by the stale holder would have freed b's live lock for anyone")
			}
			res.Exit()
			mr.Del("job")
			g := legacysetnx.Guarantees()
			if !g.StaleReleaseSafe || g.SurvivesHolderPause || g.Fencing {
				t.Errorf("Guarantees %+v do not match what this test shows", g)
			}
		})
	}
}

// TestSameTimestampResidualRisk shows the declared residual risk: when a
// third party deletes a live lock and the next holder writes the same
// timestamp (same second, same TTL), the former holder's compare-and-delete
// matches and removes it. Milliseconds make equal timestamps far less
// likely.
func TestSameTimestampResidualRisk(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	base := time.Unix(1_800_000_000, 100_000_000)
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr.FlushAll()
			a := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Clock: func() time.Time { return base }})
			b := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Clock: func() time.Time { return base.Add(700 * time.Millisecond) }})
			la, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			mr.Del("k") // an old client's stale plain DEL, or an operator
			lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if stamp(t, la).Value() != stamp(t, lb).Value() {
				t.Fatalf("timestamps %s and %s differ; the case under test needs them equal", stamp(t, la).Value(), stamp(t, lb).Value())
			}
			if err := la.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if mr.Exists("k") {
				t.Fatal("expected the residual risk to show: equal timestamps let the former holder delete the next lock")
			}
			lb.Release(ctx)

			// The same sequence in milliseconds: the timestamps differ, the
			// stale release is refused.
			am := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, Clock: func() time.Time { return base }})
			bm := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, Clock: func() time.Time { return base.Add(700 * time.Millisecond) }})
			la, err = am.TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			mr.Del("k")
			lb, err = bm.TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("milliseconds: stale Release = %v, want ErrLost", err)
			}
			if v, _ := mr.Get("k"); v != stamp(t, lb).Value() {
				t.Errorf("milliseconds: the next holder's lock was changed: %q", v)
			}
		})
	}
}

// TestGetSetLoserOverwrites shows the note about old clients' losing GETSET:
// it overwrites the winner's timestamp, so the winner's Release and Extend
// report ErrLost and the key stays until that timestamp passes; no one else
// gets the lock meanwhile.
func TestGetSetLoserOverwrites(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redistest.GoRedisClient(t, mr.Addr())
	ctx := ctxT(t)
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			lk := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."})
			now := time.Now().Unix()
			mr.Set("lock.x", strconv.FormatInt(now-3, 10)) // expired
			// The old client read the expired value (GET), then lockswap
			// took the lock, then the old client's GETSET runs.
			l, err := lk.TryAcquire(ctx, "x", lockswap.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			oldExp := strconv.FormatInt(now+5+1+1, 10)
			prev := rdb.GetSet(ctx, "lock.x", oldExp).Val()
			if n, _ := strconv.ParseInt(prev, 10, 64); n < now {
				t.Fatalf("old client's GETSET returned %q, which it would read as a win", prev)
			}
			if _, err := lk.TryAcquire(ctx, "x", lockswap.WithTTL(5*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Errorf("while the winner holds: %v, want ErrHeld", err)
			}
			if err := l.Extend(ctx, 5*time.Second); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("winner's Extend after the loser's overwrite: %v, want ErrLost", err)
			}
			if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("winner's Release: %v, want ErrLost", err)
			}
			if v, _ := mr.Get("lock.x"); v != oldExp {
				t.Errorf("key = %q, want the loser's timestamp %s left in place", v, oldExp)
			}
			mr.Del("lock.x")
		})
	}
}
