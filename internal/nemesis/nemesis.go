// Package nemesistest runs a random, seeded schedule of faults beside a
// workload (the nemesis of a Jepsen test, issue 32): one fault at a time,
// each held for a random time, with random gaps between, until the context
// ends. The same seed gives the same order, faults and durations, so a
// failing run can be replayed (the wall-clock interleaving with the
// workload still varies). Tests build the faults from the servers they
// started (SIGSTOP, a restart without persistence, a proxy's delay or
// blackhole) and the workload's own (a holder that pauses past its lock).
package nemesistest

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// Flags a test that runs a schedule reads: the seed to replay (0: a new
// one, logged) and how long to run.
var (
	seedFlag = flag.Uint64("nemesis.seed", 0, "seed of the nemesis schedule to replay (0: a new one, logged)")
	forFlag  = flag.Duration("nemesis.for", 0, "how long a nemesis test runs (0: the test's default)")
)

// Fault is one kind of fault.
type Fault struct {
	// Name says what the fault does, for the log ("pause master 1").
	Name string
	// Inject starts the fault and returns what ends it (nil: nothing to
	// end, such as a restart).
	Inject func() (heal func(), err error)
}

// Event is one fault as it ran.
type Event struct {
	Fault      string
	Start, End time.Duration // since the schedule began
}

// Schedule is a seeded schedule of Faults.
type Schedule struct {
	Faults []Fault
	// MaxHold is the longest a fault lasts, MaxGap the longest pause
	// between two; each is drawn uniformly from [0, max].
	MaxHold, MaxGap time.Duration
	// Seed makes the schedule; 0 takes -nemesis.seed, or a new seed.
	Seed uint64
}

// Seed returns the seed a test should use: -nemesis.seed when set, else a
// new one from the clock. The test logs it (see Run).
func Seed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return uint64(time.Now().UnixNano())
}

// Duration returns -nemesis.for when set, else def.
func Duration(def time.Duration) time.Duration {
	if *forFlag > 0 {
		return *forFlag
	}
	return def
}

// Rand returns a source drawn from seed, safe for concurrent use, for the
// workload's own random faults (which sections pause).
func Rand(seed uint64) *Locked { return &Locked{r: rand.New(rand.NewPCG(seed, ^seed))} }

// Locked is a *rand.Rand behind a mutex.
type Locked struct {
	mu sync.Mutex
	r  *rand.Rand
}

// IntN returns, as rand.Rand.IntN, a number in [0, n).
func (l *Locked) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// Run runs the schedule until ctx ends, one fault at a time, healing the
// one in place when ctx ends, and returns what ran. The seed and the
// events are logged on t, so that a failing test says how to replay it.
func (s Schedule) Run(ctx context.Context, t testing.TB) []Event {
	t.Helper()
	seed := s.Seed
	if seed == 0 {
		seed = Seed()
	}
	t.Logf("nemesis: seed %d (replay with -nemesis.seed=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed))
	start := time.Now()
	var events []Event
	defer func() {
		var b strings.Builder
		for _, e := range events {
			fmt.Fprintf(&b, "\n  %8v – %8v  %s", e.Start.Round(time.Millisecond), e.End.Round(time.Millisecond), e.Fault)
		}
		t.Logf("nemesis: %d faults:%s", len(events), b.String())
	}()
	wait := func(d time.Duration) bool {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-tm.C:
			return true
		}
	}
	for {
		if !wait(time.Duration(r.Int64N(int64(s.MaxGap) + 1))) {
			return events
		}
		f := s.Faults[r.IntN(len(s.Faults))]
		hold := time.Duration(r.Int64N(int64(s.MaxHold) + 1))
		e := Event{Fault: f.Name, Start: time.Since(start)}
		heal, err := f.Inject()
		if err != nil {
			t.Errorf("nemesis: %s: %v", f.Name, err)
			return events
		}
		wait(hold)
		if heal != nil {
			heal()
		}
		e.End = time.Since(start)
		events = append(events, e)
		if ctx.Err() != nil {
			return events
		}
	}
}
