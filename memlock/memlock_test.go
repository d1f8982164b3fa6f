package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/memlock"
	"github.com/lockswap/lockswap/registry"
)

func TestConformance(t *testing.T) {
	store := memlock.NewStore()
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return memlock.New(store) },
		TTL:       200 * time.Millisecond,
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := memlock.NewWithOptions(store, memlock.Options{TTL: ttl})
			if err != nil {
				return nil, err
			}
			return lk, nil
		},
	})
}

// TestSemaphoreConformance: memlock's counting semaphores pass the
// semaphore suite.
func TestSemaphoreConformance(t *testing.T) {
	store := memlock.NewStore()
	conformance.RunSemaphore(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return memlock.New(store) },
		TTL:       200 * time.Millisecond,
	})
}

// TestURL: memlock:// URLs with the same store= share one Store (their
// Lockers exclude each other), ttl= is the default TTL, and hosts are
// refused.
func TestURL(t *testing.T) {
	ctx := context.Background()
	a, err := registry.OpenURL(ctx, "memlock://?store=url-test&ttl=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := registry.OpenURL(ctx, "memlock://?store=url-test")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err := a.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL() != 2*time.Second {
		t.Errorf("TTL() = %v, want ttl= 2s", l.TTL())
	}
	if _, err := b.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("another Locker of the same store: err = %v, want ErrHeld", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"memlock://host:1", "memlock://?ttl=1ns", "memlock://?colour=red"} {
		if _, err := registry.OpenURL(ctx, raw); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", raw, err)
		}
	}
}

func Example() {
	store := memlock.NewStore()
	a, b := memlock.New(store), memlock.New(store)
	ctx := context.Background()

	l, err := a.TryAcquire(ctx, "report", lockswap.WithTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	_, err = b.TryAcquire(ctx, "report", lockswap.WithTTL(time.Minute))
	fmt.Println("second locker:", err)
	fmt.Println("release:", l.Release(ctx))
	// Output:
	// second locker: memlock: acquire "report": lock held by another owner
	// release: <nil>
}

// TestReadWriteConformance: memlock's read-write locks pass the
// read-write suite.
func TestReadWriteConformance(t *testing.T) {
	store := memlock.NewStore()
	conformance.RunReadWrite(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return memlock.New(store) },
		TTL:       200 * time.Millisecond,
	})
}
