package conformance

import (
	"sync"
	"sync/atomic"
	"time"
)

// LagProbe measures how late this process's goroutines run while a call
// is under test: a goroutine of its own sleeps 1 ms again and again and
// records by how much each wake-up came later than asked. On an idle
// machine that is well under a millisecond; beside CPU hogs, under the
// race detector or in a container throttled to its CPU limit it is tens
// of milliseconds and more, and every step of a call (a timer, a reply
// read, a goroutine woken) can be that late. Tests derive their timing
// allowance from it ([LagProbe.Allowance]) instead of a fixed figure.
type LagProbe struct {
	max  atomic.Int64 // the largest lag seen, in nanoseconds
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// lagTick is the sleep the probe asks for.
const lagTick = time.Millisecond

// LagFactor is how many of the largest lags [LagProbe.Allowance] allows a
// call on top of [Slack]: a call wakes up several times, one goroutine
// handing over to the next (its request's timer, the fan-out to each
// server, the client's writer and reader, the undo of an unknown outcome,
// the caller), and each wake-up can be as late. The probe's goroutine,
// woken by a timer, also tends to run sooner than one woken by the
// network. 4 did not cover a fenced Redlock Acquire on rueidis in a loaded
// CI run (383 ms past its deadline with lags up to 13 ms measured).
const LagFactor = 8

// MaxLagAllowance caps what the measured lags add to an allowance: a bug
// that burns the process's CPU or blocks its scheduler would otherwise
// raise its own allowance.
const MaxLagAllowance = time.Second

// StartLagProbe starts measuring. Stop it with [LagProbe.Stop].
func StartLagProbe() *LagProbe {
	p := &LagProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTimer(lagTick)
		defer t.Stop()
		for {
			asked := time.Now()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			if lag := time.Since(asked) - lagTick; lag > time.Duration(p.max.Load()) {
				p.max.Store(int64(lag))
			}
			t.Reset(lagTick)
		}
	}()
	return p
}

// Stop ends the measurement and returns the largest lag seen. It may be
// called more than once, also concurrently.
func (p *LagProbe) Stop() time.Duration {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	return p.Max()
}

// Max returns the largest lag seen so far.
func (p *LagProbe) Max() time.Duration { return time.Duration(p.max.Load()) }

// Allowance returns how far past a bound the library promises a call
// measured while the probe ran may return and still keep it: [Slack] (the
// declared DeadlineOverrun plus a floor for scheduling) plus [LagFactor]
// times the largest lag seen. A process starved of CPU keeps its bounds
// in the time it runs, plus the scheduler's delays (docs/errors.md).
func (p *LagProbe) Allowance() time.Duration { return Slack + p.Extra() }

// Extra returns what the lags seen add to a bound: [LagFactor] times the
// largest, at most [MaxLagAllowance].
func (p *LagProbe) Extra() time.Duration { return min(LagFactor*p.Max(), MaxLagAllowance) }
