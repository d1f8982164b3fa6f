package conformance_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/memlock"
)

// forgetful is a broken Locker: every call uses a fresh store, so it never
// sees another holder. The suite must catch it.
type forgetful struct{ lockswap.Locker }

func (forgetful) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return memlock.New(memlock.NewStore()).TryAcquire(ctx, key, opts...)
}

func (forgetful) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return memlock.New(memlock.NewStore()).Acquire(ctx, key, opts...)
}

// TestBrokenLockerRun is the subject of TestSuiteCatchesBrokenLocker: it
// runs only in the child process.
func TestBrokenLockerRun(t *testing.T) {
	if os.Getenv("LOCKSWAP_CONFORMANCE_SELFTEST") != "1" {
		t.Skip("runs as the child of TestSuiteCatchesBrokenLocker")
	}
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return forgetful{memlock.New(memlock.NewStore())} },
		TTL:       100 * time.Millisecond,
	})
}

// TestSuiteCatchesBrokenLocker: the suite fails a Locker that does not
// exclude, and says which rules it broke.
func TestSuiteCatchesBrokenLocker(t *testing.T) {
	// Only the cases whose rules it checks: against a Locker that never
	// excludes, the cases that wait for a holder wait for their own 30 s
	// limits (two minutes in all).
	catches(t, "TestBrokenLockerRun", "MutualExclusion|TryAcquireHeld|History", "a Locker that never excludes anyone", []string{
		"mutual exclusion broken",
		"TryAcquire on a key another Locker holds",
		"--- FAIL: TestBrokenLockerRun/MutualExclusion",
		"--- FAIL: TestBrokenLockerRun/TryAcquireHeld",
		"--- FAIL: TestBrokenLockerRun/History", // each lock has fence 1: repeated, not rising
		"fence violations",
	})
}

// catches runs the cases of the child test run (a suite run over a broken
// Locker) in a child process and requires that they fail, naming each
// broken rule; what says what the broken Locker does.
func catches(t *testing.T, run, cases, what string, rules []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$/^("+cases+")$", "-test.v")
	cmd.Env = append(os.Environ(), "LOCKSWAP_CONFORMANCE_SELFTEST=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed %s:\n%s", what, out)
	}
	for _, rule := range rules {
		if !strings.Contains(string(out), rule) {
			t.Errorf("the suite's output does not name the broken rule %q:\n%s", rule, out)
		}
	}
}

// TestBrokenSemaphoreRun is the subject of TestSemaphoreSuiteCatchesBroken:
// it runs only in the child process.
func TestBrokenSemaphoreRun(t *testing.T) {
	if os.Getenv("LOCKSWAP_CONFORMANCE_SELFTEST") != "1" {
		t.Skip("runs as the child of TestSemaphoreSuiteCatchesBroken")
	}
	conformance.RunSemaphore(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker { return forgetful{memlock.New(memlock.NewStore())} },
		TTL:       100 * time.Millisecond,
	})
}

// TestSemaphoreSuiteCatchesBroken: the semaphore suite fails a Locker
// whose permits have no limit, and says which rules it broke.
func TestSemaphoreSuiteCatchesBroken(t *testing.T) {
	catches(t, "TestBrokenSemaphoreRun", "PermitsUpToLimit|NeverMoreThanLimit|MixedLimitsRefused|MutexAndSemaphoreRefused",
		"a Locker whose permits have no limit", []string{
			"a permit beyond the limit",
			"holders inside at once, the limit is 2",
			"while permits of limit 2 are held",
			"a permit of a key whose mutex is held",
		})
}
