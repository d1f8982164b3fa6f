// Package nemesistest is package nemesis for tests: the flags that replay
// a schedule (-nemesis.seed) and run it longer (-nemesis.for), a schedule
// that logs on its test, and the check of a recorded history that fails
// the test and keeps the history of a failure.
package nemesistest

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesis"
)

// Flags a test that runs a schedule reads: the seed to replay (0: a new
// one, logged) and how long to run.
var (
	seedFlag = flag.Uint64("nemesis.seed", 0, "seed of the nemesis schedule to replay (0: a new one, logged)")
	forFlag  = flag.Duration("nemesis.for", 0, "how long a nemesis test runs (0: the test's default)")
)

// The parts of package nemesis the tests use as they are.
type (
	// Fault is nemesis.Fault.
	Fault = nemesis.Fault
	// Event is nemesis.Event.
	Event = nemesis.Event
	// Locked is nemesis.Locked.
	Locked = nemesis.Locked
)

var (
	// Rand is nemesis.Rand.
	Rand = nemesis.Rand
	// PauseHolder is nemesis.PauseHolder.
	PauseHolder = nemesis.PauseHolder
	// RedisFaults is nemesis.RedisFaults.
	RedisFaults = nemesis.RedisFaults
	// EtcdFaults is nemesis.EtcdFaults.
	EtcdFaults = nemesis.EtcdFaults
	// ProxyFaults is nemesis.ProxyFaults.
	ProxyFaults = nemesis.ProxyFaults
)

// Schedule is a nemesis.Schedule whose Run logs on a test.
type Schedule nemesis.Schedule

// Seed returns the seed a test should use: -nemesis.seed when set, else a
// new one. The test logs it (see Run).
func Seed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return nemesis.NewSeed()
}

// Duration returns -nemesis.for when set, else def.
func Duration(def time.Duration) time.Duration {
	if *forFlag > 0 {
		return *forFlag
	}
	return def
}

// seeded is s with Seed when its own is 0, logged on t with how to
// replay it.
func (s Schedule) seeded(t testing.TB) nemesis.Schedule {
	ns := nemesis.Schedule(s)
	if ns.Seed == 0 {
		ns.Seed = Seed()
	}
	t.Logf("nemesis: replay with -nemesis.seed=%d", ns.Seed)
	return ns
}

// Run runs the schedule (nemesis.Schedule.Run) until ctx ends, with Seed
// when its own is 0, and logs the seed (with how to replay it) and the
// events on t; a fault that could not be injected fails t.
func (s Schedule) Run(ctx context.Context, t testing.TB) []Event {
	t.Helper()
	events, err := s.seeded(t).Run(ctx, t.Logf)
	if err != nil {
		t.Error(err)
	}
	return events
}

// RunWorkload runs w beside the schedule s until ctx ends, and returns
// the history w recorded. It fails t when w stopped on an error before
// ctx ended (a workload error, not a verdict on the lock).
func RunWorkload(ctx context.Context, t testing.TB, s Schedule, w history.Workload) []history.Op {
	t.Helper()
	ops, _, err := nemesis.RunWorkload(ctx, s.seeded(t), w, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// CheckHistory checks ops with package history (Porcupine, and the
// fences' order when the register checked them) and returns the result.
// It fails t when fewer than minSections sections ran (a busy machine and
// the faults slow a workload, but some must run) and, with wantSafe, when
// the history is not linearizable, could not be decided within a minute,
// or fences went backwards: then the seed, the history (JSON lines) and
// Porcupine's view of each failing key are written to a folder it names.
func CheckHistory(t testing.TB, seed uint64, ops []history.Op, minSections int, wantSafe bool) history.Result {
	t.Helper()
	res, err := history.Check(ops, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var late, rejected int
	for _, op := range ops {
		if op.Late {
			late++
		}
		if !op.Wrote {
			rejected++
		}
	}
	t.Logf("%d sections, %d outlived their lock, %d rejected by their fence", len(ops), late, rejected)
	if len(ops) < minSections {
		t.Errorf("only %d sections ran, want %d at least", len(ops), minSections)
	}
	if wantSafe && (!res.Linearizable || res.Unknown != nil || res.Fences != nil) {
		dir := SaveHistory(t, ops, res)
		t.Fatalf("seed %d: violations on %q, undecided %q, fences %q; history and views in %s", seed, res.Violations, res.Unknown, res.Fences, dir)
	}
	return res
}

// SaveHistory writes ops and Porcupine's view of each key res found in
// violation (nemesis.Save) to a new folder that outlives the test, and
// returns its path.
func SaveHistory(t testing.TB, ops []history.Op, res history.Result) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lockswap-nemesis-")
	if err != nil {
		dir = t.TempDir()
	}
	if _, err := nemesis.Save(dir, ops, res); err != nil {
		t.Error(err)
	}
	return dir
}
