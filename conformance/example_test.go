package conformance_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/memlock"
)

// A backend's whole conformance hook-up: Lockers that share one store,
// each its own client, and the fault controls the store offers.
func ExampleRun() {
	store := memlock.NewStore()
	var t *testing.T // in a real test: func TestConformance(t *testing.T)
	if t == nil {
		return
	}
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return memlock.New(store) },
		TTL:       200 * time.Millisecond,
	})
}
