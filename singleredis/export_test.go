package singleredis

// Waiting returns how many Acquire calls of lk wait for key (tests).
func Waiting(lk *Locker, key string) int { return lk.Locker.Waiting(key) }

// QueuedKeys returns how many keys have waiting Acquire calls in lk (tests).
func QueuedKeys(lk *Locker) int { return lk.WaitingKeys() }
