package workers_test

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
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

// TestRunDropsStarterLabels: a worker started by a goroutine with profiler
// labels does not keep them: the commands it serves belong to many
// callers, and a CPU profile would show them all under the starter's. A
// burst of 16 blocked functions makes new workers whatever waits already;
// the goroutine profile (its text form lists each goroutine's labels)
// must show none of them under the starter's label. A goroutine started
// by a go statement under another label is the control: the profile must
// show its label, or the check would pass for a profile without labels.
func TestRunDropsStarterLabels(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var started sync.WaitGroup
	started.Add(17)
	pprof.Do(context.Background(), pprof.Labels("lockswap_test_control", "yes"), func(context.Context) {
		go func() {
			started.Done()
			<-release
		}()
	})
	pprof.Do(context.Background(), pprof.Labels("lockswap_test_starter", "yes"), func(context.Context) {
		for range 16 {
			workers.Run(func() {
				started.Done()
				<-release
			})
		}
	})
	started.Wait()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "workers.worker") {
		t.Fatal("no worker in the goroutine profile")
	}
	if !strings.Contains(buf.String(), "lockswap_test_control") {
		t.Fatalf("the goroutine profile shows no labels, not even the control goroutine's:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), "lockswap_test_starter") {
		t.Errorf("a worker runs under the labels of the goroutine that started it:\n%s", buf.String())
	}
}
