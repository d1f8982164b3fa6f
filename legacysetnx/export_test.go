package legacysetnx

// Waiting returns how many Acquire calls of lk wait for key (tests).
func Waiting(lk *Locker, key string) int { return lk.Locker.Waiting(key) }
