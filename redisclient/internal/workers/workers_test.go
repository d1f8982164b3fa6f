package workers_test

import (
	"sync"
	"testing"

	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// TestRun: Run runs its function on another goroutine without waiting
// for it, even when every worker is busy; a function handed over while a
// worker waits goes to that worker rather than to a new one; and the
// workers of a burst end once it is over, none left behind.
func TestRun(t *testing.T) {
	stalltest.WaitWorkers(t, "workers left by earlier tests", func(n, _ int) bool { return n == 0 })
	run := func() {
		done := make(chan struct{})
		workers.Run(func() { close(done) })
		<-done
	}

	stalltest.CheckWorkerReuse(t, "Run", run, run)

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
	if stacks, _ := stalltest.Workers(); len(stacks) < 16 {
		t.Errorf("%d workers for 16 functions running at once", len(stacks))
	}
	close(release)
	stalltest.WaitWorkers(t, "the burst's workers did not end", func(n, _ int) bool { return n == 0 })
}
