package workers_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// workerFrame is on the stack of each worker goroutine.
const workerFrame = "redisclient/internal/workers.worker("

// workerStacks returns the stacks of the workers, and how many of them
// wait for a command (blocked in their select).
func workerStacks() (stacks []string, parked int) {
	stacks = stalltest.Goroutines(workerFrame)
	for _, g := range stacks {
		if header, _, _ := strings.Cut(g, "\n"); strings.Contains(header, "[select") {
			parked++
		}
	}
	return stacks, parked
}

// waitWorkers waits, up to 5 s, until ok holds of the workers.
func waitWorkers(t *testing.T, what string, ok func(n, parked int) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		stacks, parked := workerStacks()
		if ok(len(stacks), parked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d workers after 5 s (%d waiting):\n%s", what, len(stacks), parked, strings.Join(stacks, "\n\n"))
		}
	}
}

// TestRun: Run runs its function on another goroutine without waiting
// for it, even when every worker is busy; a function handed over while a
// worker waits goes to that worker rather than to a new one; and the
// workers of a burst end once it is over, none left behind.
func TestRun(t *testing.T) {
	waitWorkers(t, "workers left by earlier tests", func(n, _ int) bool { return n == 0 })
	run := func() {
		done := make(chan struct{})
		workers.Run(func() { close(done) })
		<-done
	}

	// The worker cannot have ended before Idle has passed since the
	// first function started; a round that took longer proves nothing
	// and is run again.
	for round := 0; ; round++ {
		start := time.Now()
		run()
		waitWorkers(t, "after one function", func(_, parked int) bool { return parked >= 1 })
		before, _ := workerStacks()
		run()
		after, _ := workerStacks()
		if time.Since(start) >= workers.Idle {
			if round == 20 {
				t.Fatalf("no round took less than %v", workers.Idle)
			}
			continue
		}
		if len(after) > len(before) {
			t.Errorf("a function started a worker while one waited (%d before, %d after)", len(before), len(after))
		}
		break
	}

	// 16 functions that block until released: Run returns for each at
	// once, so each has a worker of its own.
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(16)
	for range 16 {
		workers.Run(func() {
			started.Done()
			<-release
		})
	}
	started.Wait()
	if stacks, _ := workerStacks(); len(stacks) < 16 {
		t.Errorf("%d workers for 16 functions running at once", len(stacks))
	}
	close(release)
	waitWorkers(t, "the burst's workers did not end", func(n, _ int) bool { return n == 0 })
}
