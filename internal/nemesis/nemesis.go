// Package nemesis runs a random, seeded schedule of faults beside a
// workload (the nemesis of a Jepsen test, issue 32): one fault at a time,
// each held for a random time, with random gaps between, until the context
// ends. The same seed gives the same order, faults and durations, so a
// failing run can be replayed (the wall-clock interleaving with the
// workload still varies). The faults come from the servers a run started
// (SIGSTOP, a restart without persistence, a proxy's delay or blackhole)
// and the workload's own (a holder that pauses past its lock). `lockswap
// history` and the tests (internal/nemesistest) run it.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/lockswap/lockswap/history"
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
	// Seed makes the schedule; 0 takes a new one.
	Seed uint64
}

// NewSeed returns a new seed, from the clock.
func NewSeed() uint64 { return uint64(time.Now().UnixNano()) }

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
// one in place when ctx ends, and returns what ran. A Seed of 0 takes a
// new one (NewSeed). logf, when not nil, gets the seed first and the
// events at the end, so that a failing run says how to replay it. A fault
// that cannot be injected ends the schedule with its error.
func (s Schedule) Run(ctx context.Context, logf func(format string, args ...any)) ([]Event, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	seed := s.Seed
	if seed == 0 {
		seed = NewSeed()
	}
	logf("nemesis: seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	start := time.Now()
	var events []Event
	defer func() {
		var b strings.Builder
		for _, e := range events {
			fmt.Fprintf(&b, "\n  %8v – %8v  %s", e.Start.Round(time.Millisecond), e.End.Round(time.Millisecond), e.Fault)
		}
		logf("nemesis: %d faults:%s", len(events), b.String())
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
			return events, nil
		}
		f := s.Faults[r.IntN(len(s.Faults))]
		hold := time.Duration(r.Int64N(int64(s.MaxHold) + 1))
		e := Event{Fault: f.Name, Start: time.Since(start)}
		heal, err := f.Inject()
		if err != nil {
			return events, fmt.Errorf("nemesis: %s: %w", f.Name, err)
		}
		wait(hold)
		if heal != nil {
			heal()
		}
		e.End = time.Since(start)
		events = append(events, e)
		if ctx.Err() != nil {
			return events, nil
		}
	}
}

// RunWorkload runs w beside the schedule s until ctx ends, and returns the
// history w recorded and the faults that ran. The error is the schedule's
// (a fault that could not be injected), or w's when w stopped before ctx
// ended (a workload error, not a verdict on the lock).
func RunWorkload(ctx context.Context, s Schedule, w history.Workload, logf func(format string, args ...any)) ([]history.Op, []Event, error) {
	type ran struct {
		events []Event
		err    error
	}
	done := make(chan ran, 1)
	go func() {
		ev, err := s.Run(ctx, logf)
		done <- ran{ev, err}
	}()
	werr := w.Run(ctx)
	r := <-done
	switch {
	case r.err != nil:
		return nil, r.events, r.err
	case !errors.Is(werr, context.DeadlineExceeded) && !errors.Is(werr, context.Canceled):
		return nil, r.events, fmt.Errorf("the workload ended with %v before its time", werr)
	}
	return w.Recorder.Ops(), r.events, nil
}
