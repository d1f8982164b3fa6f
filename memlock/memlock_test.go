package memlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/memlock"
)

func TestConformance(t *testing.T) {
	store := memlock.NewStore()
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return memlock.New(store) },
		TTL:       200 * time.Millisecond,
	})
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
