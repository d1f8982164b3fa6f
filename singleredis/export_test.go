package singleredis

import (
	"context"
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

// RunRWAcquire runs the read-write acquire script for a write hold of key
// by token, as writer id whose wait has wait left, unfenced (tests of
// the script's marks); it returns the script's code.
func RunRWAcquire(ctx context.Context, lk *Locker, key, token, id string, ttl, wait time.Duration) (int64, error) {
	v, err := lk.p.c.Run(ctx, rwAcquire, []string{lk.p.prefix + key}, token, ttl.Milliseconds(), rwModeWrite, id, wait.Milliseconds(), 0)
	if err != nil {
		return 0, err
	}
	r, _ := fairReply(v)
	return r[0], nil
}
