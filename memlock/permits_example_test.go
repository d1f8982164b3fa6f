package memlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// Up to two holders of "pool" at once: a counting semaphore's permits,
// each a Lock of its own with the slot it holds.
func Example_permits() {
	ctx := context.Background()
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()

	a, _ := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(2))
	b, _ := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(2))
	slotA, _ := lockswap.Slot(a)
	slotB, _ := lockswap.Slot(b)
	fmt.Println("slots", slotA, slotB)

	_, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(2))
	fmt.Println("a third:", errors.Is(err, lockswap.ErrHeld))
	_, err = lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3))
	fmt.Println("another limit:", errors.Is(err, lockswap.ErrInvalid))

	a.Release(ctx)
	c, _ := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(2))
	slotC, _ := lockswap.Slot(c)
	fmt.Println("after a release, slot", slotC)
	b.Release(ctx)
	c.Release(ctx)
	// Output:
	// slots 0 1
	// a third: true
	// another limit: true
	// after a release, slot 0
}
