package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

// TestLostAtRelease: a lock whose TTL passed before Release counts once as
// lost (seen by release), and its hold ends at its Deadline.
func TestLostAtRelease(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	defer lk.Close()
	ctx := context.Background()
	before := time.Now()
	l, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(shortTTL))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	deadline := l.Deadline()
	takeOver(t, unwrap(lk), "job")
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Release after the TTL: %v, want ErrLost", err)
	}
	_ = l.Release(ctx)
	ms := r.collect(t)
	if n := counter(t, ms, lockotel.MetricLocksLost, backendMemlock, operation(lockotel.OpRelease)); n != 1 {
		t.Errorf("locks lost at release: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost); n != 1 {
		t.Errorf("locks lost: %d, want 1", n)
	}
	n, sum := histCount(t, ms, lockotel.MetricHoldDuration, outcome(lockotel.OutcomeLost))
	if n != 1 || sum > deadline.Sub(before).Seconds() {
		t.Errorf("hold of the lost lock: %d values summing %vs, want one ending by its deadline (%vs after before Acquire)", n, sum, deadline.Sub(before).Seconds())
	}
	if n := counter(t, ms, lockotel.MetricReleaseFailures); n != 0 {
		t.Errorf("a lost lock's Release counted as %d release failures", n)
	}
	rel := r.ended("lockswap.Release")
	if len(rel) == 0 || rel[0].Status().Code != codes.Error || rel[0].Status().Description != lockotel.OutcomeLost {
		t.Errorf("release span of a lost lock: %+v", rel)
	}
}

// shortTTL is the TTL of locks a test lets expire: short, but long
// enough that a loaded scheduler does not use it all up before the
// acquisition returns (the kit would refuse it as too short).
const shortTTL = 50 * time.Millisecond

// takeOver waits, bounded, until lk takes key: the lock held on it
// expired in the store. It releases what it took.
func takeOver(t *testing.T, lk lockswap.Locker, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := lk.Acquire(ctx, key, lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
	if err != nil {
		t.Fatalf("the expired lock on %s was not taken over within 10s: %v", key, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// unwrap returns the Locker lk wraps.
func unwrap(lk lockswap.Locker) lockswap.Locker {
	return lk.(interface{ Unwrap() lockswap.Locker }).Unwrap()
}

// TestLostWhenDoneClosedFirst: a lock whose Done closed before Release (the
// backend saw it lost) counts as lost even when Release then answers nil.
func TestLostWhenDoneClosedFirst(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(&stub{})
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	close(l.(interface{ Unwrap() lockswap.Lock }).Unwrap().(*stubLock).done)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ms := r.collect(t)
	if n := counter(t, ms, lockotel.MetricLocksLost, operation(lockotel.OpRelease)); n != 1 {
		t.Errorf("locks lost: %d, want 1", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, outcome(lockotel.OutcomeLost)); n != 1 {
		t.Errorf("lost holds: %d, want 1", n)
	}
}

// TestLostAtExtend: an Extend that finds the lock lost counts it lost
// (seen by extend) and ends its hold; the Release after it counts nothing
// more.
func TestLostAtExtend(t *testing.T) {
	r := newRecorder(t)
	store := memlock.NewStore()
	lk := r.wrap(memlock.New(store))
	defer lk.Close()
	ctx := context.Background()
	// Each Extend comes well within the TTL before it, even on a loaded
	// machine; the last one is short, so that Done fires soon.
	l, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{time.Second, shortTTL} {
		if err := l.Extend(ctx, ttl); err != nil {
			t.Fatal(err)
		}
	}
	<-l.Done()
	if err := l.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Extend after the TTL: %v, want ErrLost", err)
	}
	_ = l.Release(ctx)
	ms := r.collect(t)
	if n := counter(t, ms, lockotel.MetricExtensions, backendMemlock, outcome(lockotel.OutcomeExtended)); n != 2 {
		t.Errorf("extensions: %d, want 2", n)
	}
	if n := counter(t, ms, lockotel.MetricExtensions, outcome(lockotel.OutcomeLost)); n != 1 {
		t.Errorf("extensions that found the lock lost: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost, operation(lockotel.OpExtend)); n != 1 {
		t.Errorf("locks lost at extend: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost); n != 1 {
		t.Errorf("locks lost: %d, want 1 (Release must not count it again)", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration); n != 1 {
		t.Errorf("hold values: %d, want 1", n)
	}
	if ext := r.ended("lockswap.Extend"); len(ext) != 3 {
		t.Errorf("%d extend spans, want 3", len(ext))
	}
}

// TestReleaseFailure: a Release that fails other than with ErrLost counts
// as a release failure, and its hold ends as failed.
func TestReleaseFailure(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrClosed) {
		t.Fatalf("Release after Close: %v", err)
	}
	ms := r.collect(t)
	if n := counter(t, ms, lockotel.MetricReleaseFailures, backendMemlock, outcome(lockotel.OutcomeClosed)); n != 1 {
		t.Errorf("release failures (closed): %d, want 1", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, outcome(lockotel.OutcomeFailed)); n != 1 {
		t.Errorf("failed holds: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost); n != 0 {
		t.Errorf("locks lost: %d, want 0", n)
	}
}
