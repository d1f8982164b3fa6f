package lockswap_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// TestWithPermitsResolve: a limit from 1 to MaxPermits is taken, anything
// else is refused with ErrInvalid naming it; without the option a call is
// the mutex's (Permits 0).
func TestWithPermitsResolve(t *testing.T) {
	for _, n := range []int{1, 7, lockswap.MaxPermits} {
		o, err := (lockswap.Options{}).Resolve(lockswap.WithPermits(n))
		if err != nil || o.Permits != n {
			t.Errorf("WithPermits(%d): Permits %d, %v", n, o.Permits, err)
		}
	}
	for _, n := range []int{0, -3, lockswap.MaxPermits + 1} {
		if _, err := (lockswap.Options{}).Resolve(lockswap.WithPermits(n)); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("WithPermits(%d): %v, want ErrInvalid", n, err)
		}
	}
	for _, n := range []int{-5, lockswap.MaxPermits + 1} {
		if _, err := (lockswap.Options{Permits: n}).Resolve(); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Options{Permits: %d}: %v, want ErrInvalid", n, err)
		}
	}
	if o, err := (lockswap.Options{}).Resolve(); err != nil || o.Permits != 0 {
		t.Errorf("no option: Permits %d, %v; want 0 (the mutex)", o.Permits, err)
	}
}

// unwrapping is a Lock wrapper with an Unwrap method, as lockswap/otel's.
type unwrapping struct{ lockswap.Lock }

func (u unwrapping) Unwrap() lockswap.Lock { return u.Lock }

// TestSlotThroughWrapper: Slot finds a permit's slot through wrappers that
// unwrap, and says false for a mutex's lock.
func TestSlotThroughWrapper(t *testing.T) {
	ctx := context.Background()
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	p, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	q, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(2))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Release(ctx)
	if slot, ok := lockswap.Slot(unwrapping{unwrapping{q}}); !ok || slot != 1 {
		t.Errorf("Slot through two wrappers = %d, %v; want 1, true", slot, ok)
	}
	m, err := lk.TryAcquire(ctx, "mutex")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(ctx)
	if _, ok := lockswap.Slot(unwrapping{m}); ok {
		t.Error("Slot of a mutex's lock says it is a permit")
	}
}
