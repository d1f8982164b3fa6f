package redlock

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/optionstest"
)

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

// SetGuessClock makes lk guess the fences of keys it has no hint for from
// now instead of the host's clock (tests of a client whose clock is off).
// Call it while no acquisition of lk is under way.
func SetGuessClock(lk *Locker, now func() time.Time) { lk.p.hints.now = now }

// SetFenceCounterTTL sets how long fence counters live after their last
// write (tests of FenceCounterTTL), until the test ends. Call it while no
// fenced acquisition is under way.
func SetFenceCounterTTL(t testing.TB, d time.Duration) {
	if d < time.Millisecond {
		t.Fatalf("SetFenceCounterTTL(%v): Redis expiries are whole milliseconds, at least 1", d)
	}
	old := counterTTL.Load()
	counterTTL.Store(any(strconv.FormatInt(d.Milliseconds(), 10)))
	t.Cleanup(func() { counterTTL.Store(old) })
}

// URLOptions returns the Options the URL raw sets, once registry has
// checked it (urlOptions).
func URLOptions(raw string) (Options, error) {
	u, r, err := optionstest.CheckedRedis("redlock", raw)
	if err != nil {
		return Options{}, err
	}
	return urlOptions(u, r)
}

// RegisterMembers waits until lk's membership rounds (Options.Fence) have
// registered its masters, so that tests counting an acquisition's
// requests count the acquisition's alone (the next round is a quarter of
// FenceCounterTTL away).
func RegisterMembers(t testing.TB, lk *Locker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := lk.p.members.state.Load(); st != nil && st.registered {
			return
		} else if st != nil && st.err != nil {
			t.Fatal(st.err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the Locker's masters are not registered after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// SetBetweenPasses makes every membership round call f between its check
// and its registration, until the test ends.
func SetBetweenPasses(t testing.TB, f func()) {
	betweenPasses = f
	t.Cleanup(func() { betweenPasses = nil })
}

// MemberRounds returns how many membership rounds lk has run.
func MemberRounds(lk *Locker) int64 { return lk.p.members.rounds.Load() }
