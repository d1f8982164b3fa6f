package driver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// TestPermitsRefusedWithoutConfig: a driver without Config.Permits never
// hears of WithPermits: the kit refuses it with ErrInvalid.
func TestPermitsRefusedWithoutConfig(t *testing.T) {
	f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
		t.Error("the driver was asked for a permit it cannot give")
		return driver.Grant{}, nil
	}}
	lk := newLocker(t, f, driver.Config{Queue: true})
	ctx := context.Background()
	for _, acquire := range []func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error){lk.TryAcquire, lk.Acquire} {
		if _, err := acquire(ctx, "k", lockswap.WithPermits(2)); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("WithPermits without Config.Permits: err = %v, want ErrInvalid", err)
		}
	}
}

// TestPermitsThroughTheKit: the driver gets the limit as Claim.Permits (0
// for the mutex), the lock reports the Grant's slot, and a permit's
// release is a Release, never a hand-over to a mutex waiter of the key in
// the local queue (the driver's hand-over releases a mutex).
func TestPermitsThroughTheKit(t *testing.T) {
	var (
		held                   atomic.Bool
		lastPermits, handOvers atomic.Int64
	)
	f := &handOverFake{fake: &fake{
		acquire: func(_ context.Context, c *driver.Claim[int]) (driver.Grant, error) {
			lastPermits.Store(int64(c.Permits))
			switch {
			case c.Key == "k" && c.Permits == 0 && held.Load():
				return driver.Grant{}, lockswap.ErrHeld // the key's permit is held
			case c.Permits > 0 && !held.CompareAndSwap(false, true):
				return driver.Grant{}, lockswap.ErrHeld
			}
			return driver.Grant{Slot: 2 * min(c.Permits, 1)}, nil
		},
		release: func(_ context.Context, c *driver.Claim[int]) error {
			if c.Permits > 0 {
				held.Store(false)
			}
			return nil
		},
	}}
	f.handOver = func(ctx context.Context, held, next *driver.Claim[int]) (driver.Grant, error, func() error) {
		handOvers.Add(1)
		return driver.Grant{}, lockswap.ErrHeld, func() error { return f.Release(ctx, held) }
	}
	lk, err := driver.New[int](f, driver.Config{Name: "fake", Permits: true, Queue: true, Retry: lockswap.ConstantRetry(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	m, err := lk.TryAcquire(ctx, "m")
	if err != nil || lastPermits.Load() != 0 {
		t.Fatalf("the mutex: %v, Claim.Permits %d", err, lastPermits.Load())
	}
	if _, ok := lockswap.Slot(m); ok {
		t.Error("the mutex's lock says it is a permit")
	}
	m.Release(ctx)

	p, err := lk.TryAcquire(ctx, "k", lockswap.WithPermits(3))
	if err != nil || lastPermits.Load() != 3 {
		t.Fatalf("a permit: %v, Claim.Permits %d", err, lastPermits.Load())
	}
	if slot, ok := lockswap.Slot(p); !ok || slot != 2 {
		t.Errorf("Slot() = %d, %v; want the Grant's 2, true", slot, ok)
	}
	// A mutex waiter in the local queue, whose lock a release could hand
	// over: the permit's release must not.
	got := make(chan error, 1)
	go func() {
		q, err := lk.Acquire(ctx, "k")
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, "the mutex waiter's first attempt", func() bool { return lastPermits.Load() == 0 })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("the mutex waiter: %v", err)
	}
	if n := handOvers.Load(); n != 0 {
		t.Errorf("%d hand-overs of a permit; a permit's release must be a Release", n)
	}
}

// TestWaitPermitsNeedsAWaiter: Config.WaitPermits without Config.Permits
// (WaitRW without ReadWrite),
// or for a driver that does not wait, is a configuration error of New.
func TestWaitPermitsNeedsAWaiter(t *testing.T) {
	if _, err := driver.New[int](&fake{}, driver.Config{Name: "fake", Permits: true, WaitPermits: true}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("WaitPermits for a driver without Wait: err = %v, want ErrInvalid", err)
	}
	w := &waiter{free: make(chan struct{}), waits: make(chan *driver.Outage, 1)}
	if _, err := driver.New[int](w, driver.Config{Name: "waiter", WaitPermits: true}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("WaitPermits without Permits: err = %v, want ErrInvalid", err)
	}
	if _, err := driver.New[int](&fake{}, driver.Config{Name: "fake", ReadWrite: true, WaitRW: true}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("WaitRW for a driver without Wait: err = %v, want ErrInvalid", err)
	}
	if _, err := driver.New[int](w, driver.Config{Name: "waiter", WaitRW: true}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("WaitRW without ReadWrite: err = %v, want ErrInvalid", err)
	}
}
