package singleredis

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
