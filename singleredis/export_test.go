package singleredis

import (
	"time"

	"github.com/lockswap/lockswap/internal/optionstest"
)

// Waiting returns how many Acquire calls of lk wait for key (tests).
func Waiting(lk *Locker, key string) int { return lk.Locker.Waiting(key) }

// QueuedKeys returns how many keys have waiting Acquire calls in lk (tests).
func QueuedKeys(lk *Locker) int { return lk.WaitingKeys() }

// SetFairWaitersLimit sets the most waiters a fair queue takes (tests of
// MaxFairWaiters), until the test ends.
func SetFairWaitersLimit(t interface{ Cleanup(func()) }, n int) {
	old := fairWaitersLimit
	fairWaitersLimit = n
	t.Cleanup(func() { fairWaitersLimit = old })
}

// SetFenceCounterTTL sets how long fence counters live after their last
// fence (tests of FenceCounterTTL), until the test ends.
func SetFenceCounterTTL(t interface{ Cleanup(func()) }, d time.Duration) {
	old := fenceCounterTTL
	fenceCounterTTL = d
	t.Cleanup(func() { fenceCounterTTL = old })
}

// URLOptions returns the Options the URL raw sets, once registry has
// checked it (urlOptions).
func URLOptions(raw string) (Options, error) {
	u, r, err := optionstest.CheckedRedis("singleredis", raw)
	if err != nil {
		return Options{}, err
	}
	return urlOptions(u, r)
}
