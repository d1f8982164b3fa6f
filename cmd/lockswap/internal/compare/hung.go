package compare

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
)

// hungDeadline is the deadline each call of the hung-server scenario gets.
const hungDeadline = 300 * time.Millisecond

// schedulingAllowance is what the hung-server scenario allows a call past
// its deadline on top of the backend's declared DeadlineOverrun: the
// scheduling delays of a loaded machine. It is the allowance the
// conformance fault suite uses (conformance.Slack is DeadlineGrace plus
// it; a test keeps the two equal).
const schedulingAllowance = 200 * time.Millisecond

// hang is one way a fixture's servers stop answering: on makes every
// server hang, off makes them answer again (idempotent). on returns an
// error wrapping errors.ErrUnsupported when this way cannot be used on
// this OS (SIGSTOP on Windows).
type hang struct {
	name string
	on   func() error
	off  func()
}

// callOverrun is how long past its deadline one call returned (negative:
// before it), and its error.
type callOverrun struct {
	call string
	over time.Duration
	err  error
}

func declaredOverrun(g lockswap.Guarantees) (Outcome, string) {
	if g.DeadlineOverrun <= 0 {
		return NotApplicable, "no deadline overrun bound declared in Guarantees"
	}
	return InTime, fmt.Sprintf("deadline-overrun=%v", g.DeadlineOverrun)
}

// hungOutcome judges the worst overrun measured against the declared
// bound plus the scheduling allowance.
func hungOutcome(worst time.Duration, g lockswap.Guarantees) Outcome {
	if worst > g.DeadlineOverrun+schedulingAllowance {
		return Late
	}
	return InTime
}

// runHung makes the fixture's servers hang in each of its ways in turn and
// times TryAcquire, Acquire, and Extend and Release of a lock held before
// the fault, each with a hungDeadline deadline; the cell's outcome is the
// worst overrun against the declared bound. A way this OS does not support
// is left out and said not measured, as on miniredis; any other failure
// leaves the cell not run.
func runHung(ctx context.Context, f *fixture, g lockswap.Guarantees, _ int) Cell {
	lk, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	note := f.note
	var worst time.Duration
	first := true
	var parts []string
	for _, h := range f.hangs {
		overs, err := hangOnce(ctx, lk, f, h)
		if errors.Is(err, errors.ErrUnsupported) {
			note = join(note, h.name+" not measured: "+err.Error())
			continue
		}
		if err != nil {
			return Cell{Outcome: NotRun, Detail: join(note, h.name+": "+err.Error())}
		}
		var calls []string
		for _, o := range overs {
			if first || o.over > worst {
				worst, first = o.over, false
			}
			s := o.call + " " + fmtMs(o.over)
			if o.err == nil {
				s += " (succeeded)"
			}
			calls = append(calls, s)
		}
		parts = append(parts, h.name+": "+strings.Join(calls, ", "))
	}
	if first {
		return Cell{Outcome: NotRun, Detail: join(note, "no way to make these servers hang here")}
	}
	ms := worst.Milliseconds()
	return Cell{Outcome: hungOutcome(worst, g), WorstOverrunMs: &ms,
		Detail: join(note, fmt.Sprintf("past a %v deadline: %s; worst %s, allowed %v declared + %v scheduling; every server answered again afterwards",
			hungDeadline, strings.Join(parts, "; "), fmtMs(worst), g.DeadlineOverrun, schedulingAllowance))}
}

// hangOnce takes two locks, makes the servers hang with h, runs the four
// calls at once (each with its own deadline), ends the hang (also when it
// fails) and checks that the servers answer again. An error of h.on is
// returned wrapped (errors.ErrUnsupported: this way is not available here).
func hangOnce(ctx context.Context, lk lockswap.Locker, f *fixture, h hang) ([]callOverrun, error) {
	const ttl = 10 * time.Second
	toExtend, err := acquireFirst(ctx, lk, "hung-extend-"+h.name, ttl)
	if err != nil {
		return nil, fmt.Errorf("the first acquire, before any fault, failed: %s", errText(err))
	}
	toRelease, err := acquireFirst(ctx, lk, "hung-release-"+h.name, ttl)
	if err != nil {
		return nil, fmt.Errorf("the second acquire, before any fault, failed: %s", errText(err))
	}
	healed := false
	defer func() {
		if !healed {
			h.off()
		}
	}()
	if err := h.on(); err != nil {
		return nil, fmt.Errorf("making the servers hang: %w", err)
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"TryAcquire", func(ctx context.Context) error {
			_, err := lk.TryAcquire(ctx, "hung-try-"+h.name, lockswap.WithTTL(ttl))
			return err
		}},
		{"Acquire", func(ctx context.Context) error {
			_, err := lk.Acquire(ctx, "hung-acquire-"+h.name, lockswap.WithTTL(ttl))
			return err
		}},
		{"Extend", func(ctx context.Context) error { return toExtend.Extend(ctx, ttl) }},
		{"Release", func(ctx context.Context) error { return toRelease.Release(ctx) }},
	}
	out := make([]callOverrun, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, hungDeadline)
			defer cancel()
			deadline, _ := cctx.Deadline()
			err := c.call(cctx)
			out[i] = callOverrun{call: c.name, over: time.Since(deadline), err: err}
		}()
	}
	wg.Wait()
	h.off()
	healed = true
	actx, cancel := bounded(ctx, 10*time.Second)
	defer cancel()
	if f.alive == nil {
		return out, nil
	}
	if err := f.alive(actx); err != nil {
		return nil, fmt.Errorf("the servers did not answer again after the hang ended: %s", errText(err))
	}
	return out, nil
}

// fmtMs is d in whole milliseconds with its sign, such as "+101ms".
func fmtMs(d time.Duration) string { return fmt.Sprintf("%+dms", d.Milliseconds()) }
