package stalltest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// workerFrame is on the stack of each of the adapters' worker goroutines
// (package redisclient/internal/workers).
const workerFrame = "redisclient/internal/workers.worker("

// Workers returns the stacks of the adapters' worker goroutines, and how
// many of them wait for a command (blocked in their select).
func Workers() (stacks []string, parked int) {
	stacks = Goroutines(workerFrame)
	for _, g := range stacks {
		if header, _, _ := strings.Cut(g, "\n"); strings.Contains(header, "[select") {
			parked++
		}
	}
	return stacks, parked
}

// WaitWorkers waits, up to 5 s, until ok holds of the workers (how many,
// and how many wait for a command), and fails t with what and their
// stacks if it does not.
func WaitWorkers(t *testing.T, what string, ok func(n, parked int) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		stacks, parked := Workers()
		if ok(len(stacks), parked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d workers after 5 s (%d waiting):\n%s", what, len(stacks), parked, strings.Join(stacks, "\n\n"))
		}
	}
}

// CheckWorkerReuse fails t unless second, run while the worker first used
// waits for a command, goes to that worker rather than starting another.
// The worker cannot have ended before workers.Idle has passed since first
// started; a round that takes longer proves nothing and is run again, up
// to 20 times.
func CheckWorkerReuse(t *testing.T, what string, first, second func()) {
	t.Helper()
	for round := 0; ; round++ {
		start := time.Now()
		first()
		WaitWorkers(t, what+": after the first", func(_, parked int) bool { return parked >= 1 })
		before, _ := Workers()
		second()
		after, _ := Workers()
		if time.Since(start) >= workers.Idle {
			if round == 20 {
				t.Fatalf("%s: no round took less than %v", what, workers.Idle)
			}
			continue
		}
		if len(after) > len(before) {
			t.Errorf("%s: the second started a worker while one waited (%d before, %d after)", what, len(before), len(after))
		}
		return
	}
}

// Burst runs 20 commands on each of 16 goroutines at once, command being
// given a key of the goroutine's own each time, and returns when all have
// returned: enough concurrent commands to start workers beyond the ones
// that wait.
func Burst(command func(key string)) {
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				command(strings.Repeat("k", g+1) + string(rune('a'+i)))
			}
		})
	}
	wg.Wait()
}
