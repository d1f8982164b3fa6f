package driver_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/memlock"
)

// TestCountAttemptsTryAcquire: a TryAcquire is one attempt, whether it
// takes a free key or meets a holder; a call refused before any request
// counts none; a call without a counter works as before.
func TestCountAttemptsTryAcquire(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	ctx := context.Background()

	cctx, n := driver.CountAttempts(ctx)
	held, err := lk.TryAcquire(cctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("TryAcquire of a free key counted %d attempts, want 1", got)
	}

	cctx, n = driver.CountAttempts(ctx)
	if _, err := lk.TryAcquire(cctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire of a held key: %v, want ErrHeld", err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("TryAcquire of a held key counted %d attempts, want 1", got)
	}

	// Without a counter: unchanged.
	if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire without a counter: %v, want ErrHeld", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := lk.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire without a counter: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Refused before any request: nothing counted.
	cctx, n = driver.CountAttempts(ctx)
	if _, err := lk.TryAcquire(cctx, ""); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("TryAcquire of an empty key: %v, want ErrInvalid", err)
	}
	cancelled, cancel := context.WithCancel(cctx)
	cancel()
	if _, err := lk.Acquire(cancelled, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire under an ended context: %v, want context.Canceled", err)
	}
	if got := n.Load(); got != 0 {
		t.Errorf("calls refused before any request counted %d attempts, want 0", got)
	}

	var none *driver.Attempts
	if none.Load() != 0 {
		t.Error("a nil *Attempts loads non-zero")
	}
}

// parker is a Locker whose waiters between attempts can be counted.
type parker interface {
	lockswap.Locker
	Parked(key string) int
}

// waitBehind takes "k" on lk, then starts an Acquire of "k" with a counter
// and a retry delay of an hour, and returns once that Acquire is parked
// after its first attempt: the lock held, the counter, and the Acquire's
// result (its lock released) to come.
func waitBehind(t *testing.T, ctx context.Context, lk parker) (lockswap.Lock, *driver.Attempts, <-chan error) {
	t.Helper()
	held, err := lk.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	cctx, n := driver.CountAttempts(ctx)
	got := make(chan error, 1)
	go func() {
		l, err := lk.Acquire(cctx, "k", lockswap.WithRetry(lockswap.ConstantRetry(time.Hour)))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, "the waiter parked after its first attempt", func() bool { return lk.Parked("k") == 1 })
	return held, n, got
}

// TestCountAttemptsWaitBehindHolder: an Acquire that met a holder, waited
// in the local queue and was woken by the holder's release through the
// same Locker counts exactly its first attempt and the one after the
// release (its retry delay, an hour, never ran out).
func TestCountAttemptsWaitBehindHolder(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, n, got := waitBehind(t, ctx, lk)
	if c := n.Load(); c != 1 {
		t.Errorf("after the first attempt the count is %d, want 1", c)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if c := n.Load(); c != 2 {
		t.Errorf("Acquire that waited behind a holder counted %d attempts, want 2", c)
	}
}

// TestCountAttemptsHandOver: the attempt a releasing holder makes for a
// waiter (HandOver) counts for the waiter, once.
func TestCountAttemptsHandOver(t *testing.T) {
	var tokens sync.Map
	f := newHandOverFake(&tokens)
	var handOvers atomic.Int64
	f.handOver = func(_ context.Context, held, next *driver.Claim[int]) (driver.Grant, error, func() error) {
		handOvers.Add(1)
		return driver.Grant{}, nil, func() error { return nil }
	}
	lk, err := driver.New[int](f, driver.Config{Name: "fake", Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, n, got := waitBehind(t, ctx, lk)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if h := handOvers.Load(); h != 1 {
		t.Fatalf("%d hand-overs, want 1", h)
	}
	if c := n.Load(); c != 2 {
		t.Errorf("Acquire handed the lock by a release counted %d attempts, want 2 (its own, the hand-over's)", c)
	}
}

// TestCountAttemptsWaiter: a Waiter's Wait is one attempt however long it
// waits behind the holder.
func TestCountAttemptsWaiter(t *testing.T) {
	w, lk := newWaiter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cctx, n := driver.CountAttempts(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := lk.Acquire(cctx, "k")
		got <- err
	}()
	<-w.waits
	close(w.free)
	if err := <-got; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if c := n.Load(); c != 1 {
		t.Errorf("Acquire through one Wait counted %d attempts, want 1", c)
	}
}

// TestCountAttemptsNested: a counter made under another one counts its
// call's attempts; the outer one counts them too, and its own.
func TestCountAttemptsNested(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	outer, all := driver.CountAttempts(context.Background())
	l, err := lk.TryAcquire(outer, "k")
	if err != nil {
		t.Fatal(err)
	}
	inner, one := driver.CountAttempts(outer)
	if _, err := lk.TryAcquire(inner, "k"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire of a held key: %v, want ErrHeld", err)
	}
	if err := l.Release(outer); err != nil {
		t.Fatal(err)
	}
	if c := one.Load(); c != 1 {
		t.Errorf("inner counter: %d, want 1", c)
	}
	if c := all.Load(); c != 2 {
		t.Errorf("outer counter: %d, want 2 (its call's and the inner call's)", c)
	}
}
