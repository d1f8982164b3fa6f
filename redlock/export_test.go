package redlock

// Waiting returns how many Acquire calls of lk wait for key (tests).
func Waiting(lk *Locker, key string) int { return lk.Locker.Waiting(key) }

// QueuedKeys returns how many keys have waiting Acquire calls in lk (tests).
func QueuedKeys(lk *Locker) int { return lk.WaitingKeys() }

// BackgroundReleases returns how many releases of lk go on in the
// background now, and how many ended (or could not start) with
// instances whose outcome was still unknown (tests).
func BackgroundReleases(lk *Locker) (running, gaveUp int64) {
	return lk.p.bgRunning.Load(), lk.p.bgGaveUp.Load()
}
