// Package benchloop is the one place where lockswap's benchmark loops live:
// the per-package benchmarks (singleredis, legacysetnx, redlock, etcdlease),
// the cross-library module bench/ and the CLI's `lockswap bench` all run
// their acquire+release cycles through it.
//
// A Cycle takes and gives back one key. A Shape says how many goroutines
// run cycles at once and whether they share one key (contended) or each
// use their own ring of distinct keys (serial, parallel). A Loop runs a
// shape either for a number of cycles (Count: a benchmark's b.N) or for a
// time (For: the CLI), and returns a Result with the figures every caller
// reports: cycles per second, latency percentiles and fairness.
//
// The package does not import testing (cmd/lockswap links it); Bench and
// Paired take the few methods of *testing.B they use through B.
package benchloop

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
)

// Cycle acquires key, releases it, and returns the first error.
type Cycle func(ctx context.Context, key string) error

// UnderBackground returns cycle run under context.Background rather than
// under the loop's context, which can be cancelled (a Loop cancels it at
// the first error): a caller whose context nothing can cancel, whose
// requests lockswap need not watch for a cancellation.
func UnderBackground(cycle Cycle) Cycle {
	return func(_ context.Context, key string) error { return cycle(context.Background(), key) }
}

// TryCycle is one TryAcquire with ttl and Release on lk: the uncontended
// cycle.
func TryCycle(lk lockswap.Locker, ttl time.Duration) Cycle { return lockerCycle(lk.TryAcquire, ttl) }

// AcquireCycle is one Acquire with ttl (waiting per lk's retry policy)
// and Release on lk.
func AcquireCycle(lk lockswap.Locker, ttl time.Duration) Cycle { return lockerCycle(lk.Acquire, ttl) }

// HoldCycle is one call of acquire (a Locker's Acquire or TryAcquire)
// with ttl and opts (lockswap.WithPermits for a permit), hold of work
// under the lock (none when 0), and Release.
func HoldCycle(acquire func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error), ttl, hold time.Duration, opts ...lockswap.Option) Cycle {
	opts = append([]lockswap.Option{lockswap.WithTTL(ttl)}, opts...)
	return func(ctx context.Context, key string) error {
		l, err := acquire(ctx, key, opts...)
		if err != nil {
			return err
		}
		if hold > 0 {
			time.Sleep(hold) // the work done under the lock
		}
		return l.Release(ctx)
	}
}

// lockerCycle calls acquire as a user calls it (the option made in the
// call) and releases the lock.
func lockerCycle(acquire func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error), ttl time.Duration) Cycle {
	return func(ctx context.Context, key string) error {
		l, err := acquire(ctx, key, lockswap.WithTTL(ttl))
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

// KeyRing is how many distinct keys each goroutine of an uncontended shape
// uses, in turn.
const KeyRing = 1024

var keySeq atomic.Int64

// Keys returns n keys that no other call returns in this process:
// "bench:<call>:<i>".
func Keys(n int) []string {
	call := keySeq.Add(1)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("bench:%d:%d", call, i)
	}
	return ks
}

// Shape is how cycles run at once.
type Shape struct {
	// Name names the shape in benchmark names and tables: serial,
	// parallel, contended.
	Name string
	// Goroutines is how many goroutines run cycles, each with its own
	// Cycle (0 means 1).
	Goroutines int
	// OneKey makes every goroutine take the same key (one fresh key per
	// run); otherwise each goroutine has its own KeyRing distinct keys.
	OneKey bool
}

// Serial is one goroutine on distinct keys: the latency of a cycle.
var Serial = Shape{Name: "serial", Goroutines: 1}

// Parallel is n goroutines on distinct keys: throughput.
func Parallel(n int) Shape { return Shape{Name: "parallel", Goroutines: n} }

// Contended is n goroutines on one key: acquisitions per second and
// fairness.
func Contended(n int) Shape { return Shape{Name: "contended", Goroutines: n, OneKey: true} }

// Uncontended are the shapes of the per-package cycle benchmarks
// (BenchmarkCycle/.../serial/... and .../parallel/...): one goroutine, and
// 32 goroutines (16 per core on the 2-core machine the figures come from).
var Uncontended = []Shape{Serial, Parallel(32)}

func (s Shape) goroutines() int { return max(s.Goroutines, 1) }

// Timer starts and stops the clock around the measured cycles; *testing.B
// is one.
type Timer interface {
	ResetTimer()
	StopTimer()
}

// Loop is one measured run.
type Loop struct {
	Shape Shape
	// NewCycle makes one goroutine's Cycle. It is called once per
	// goroutine, on the caller's goroutine, before the clock starts
	// (sessions and dedicated connections are not timed).
	NewCycle func() Cycle
	// Warm is how many cycles each goroutine runs on its keys before the
	// clock starts, all goroutines at once (so that pools hold as many
	// connections as the run uses).
	Warm int
	// Latency records the duration of every cycle, for Result.Percentile.
	Latency bool
}

// Result is what a run measured.
type Result struct {
	Shape   Shape
	Ops     int           // cycles completed
	Elapsed time.Duration // from the first cycle's start to the last one's end
	// Latencies holds each cycle's duration, sorted (when Loop.Latency).
	Latencies []time.Duration
	// PerGoroutine counts the cycles each goroutine completed.
	PerGoroutine []int
}

// Count runs n cycles spread over the shape's goroutines (each takes the
// next cycle number from a shared counter), with timer (may be nil)
// reset as the cycles start and stopped when the last one ends. The first
// error a cycle returns stops every goroutine and is returned.
func (l Loop) Count(ctx context.Context, n int, timer Timer) (Result, error) {
	return l.run(ctx, timer, until{cycles: n})
}

// For runs cycles for d from the clock's start (after NewCycle and Warm),
// or until ctx is done. A cycle still running at the end gets grace more
// to finish (its context is cancelled then); one that fails after the end
// is not counted and not an error (a waiter cut off by the end of the
// run). The first error before the end stops every goroutine and is
// returned with the figures so far.
func (l Loop) For(ctx context.Context, d, grace time.Duration) (Result, error) {
	return l.run(ctx, nil, until{d: d, grace: grace})
}

// until is when a run ends: after cycles, or (when d > 0) after d.
type until struct {
	cycles   int
	d, grace time.Duration
}

func (l Loop) run(ctx context.Context, timer Timer, u until) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timed := u.d > 0
	var (
		next atomic.Int64
		end  time.Time // set before the goroutines pass start
	)
	more := func() bool {
		if timed {
			return time.Now().Before(end)
		}
		return next.Add(1) <= int64(u.cycles)
	}
	late := func() bool { return timed && !end.IsZero() && !time.Now().Before(end) }
	n := l.Shape.goroutines()
	cycles := make([]Cycle, n)
	keys := make([][]string, n)
	var oneKey []string
	if l.Shape.OneKey {
		oneKey = []string{fmt.Sprintf("bench:contended:%d", keySeq.Add(1))}
	}
	for g := range cycles {
		cycles[g] = l.NewCycle()
		if keys[g] = oneKey; keys[g] == nil {
			keys[g] = Keys(KeyRing)
		}
	}
	lats := make([][]time.Duration, n)
	if l.Latency {
		for g := range lats {
			lats[g] = make([]time.Duration, 0, u.cycles/n+1)
		}
	}
	counts := make([]int, n)
	var (
		failed   atomic.Bool
		errMu    sync.Mutex
		firstErr error
		warmed   sync.WaitGroup
		done     sync.WaitGroup
		start    = make(chan struct{})
	)
	fail := func(err error) {
		if late() {
			return
		}
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		failed.Store(true)
	}
	warmed.Add(n)
	done.Add(n)
	for g := range n {
		go func() {
			defer done.Done()
			cycle, ks := cycles[g], keys[g]
			for i := range l.Warm {
				if err := cycle(ctx, ks[i%len(ks)]); err != nil {
					fail(fmt.Errorf("warming up: %w", err))
					break
				}
			}
			warmed.Done()
			<-start
			for i := 0; !failed.Load() && more(); i++ {
				key := ks[i%len(ks)]
				if !l.Latency {
					if err := cycle(ctx, key); err != nil {
						fail(err)
						return
					}
					counts[g]++
					continue
				}
				t0 := time.Now()
				if err := cycle(ctx, key); err != nil {
					fail(err)
					return
				}
				lats[g] = append(lats[g], time.Since(t0))
				counts[g]++
			}
		}()
	}
	warmed.Wait()
	if timer != nil {
		timer.ResetTimer()
	}
	t0 := time.Now()
	if timed {
		end = t0.Add(u.d)
		stop := time.AfterFunc(u.d+u.grace, cancel)
		defer stop.Stop()
	}
	close(start)
	done.Wait()
	elapsed := time.Since(t0)
	if timer != nil {
		timer.StopTimer()
	}
	r := Result{Shape: l.Shape, Elapsed: elapsed, PerGoroutine: counts}
	for _, c := range counts {
		r.Ops += c
	}
	if l.Latency {
		r.Latencies = slices.Concat(lats...)
		slices.Sort(r.Latencies)
	}
	return r, firstErr
}

// PerSec is cycles per second.
func (r Result) PerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Percentile is the p-th percentile (0 < p ≤ 100, nearest rank) of the
// cycles' latencies, or 0 when none were recorded.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(r.Latencies)))) - 1
	return r.Latencies[min(max(i, 0), len(r.Latencies)-1)]
}

// Fairness is the fewest ÷ the most cycles one goroutine completed; ok is
// false when the run had fewer than two cycles per goroutine, too few for
// the figure to mean anything.
func (r Result) Fairness() (f float64, ok bool) {
	if len(r.PerGoroutine) == 0 || r.Ops < 2*len(r.PerGoroutine) {
		return 0, false
	}
	lo, hi := slices.Min(r.PerGoroutine), slices.Max(r.PerGoroutine)
	return float64(lo) / float64(hi), true
}

// B is the part of *testing.B that Bench and Paired use.
type B interface {
	Timer
	Helper()
	Fatal(args ...any)
	ReportAllocs()
	ReportMetric(n float64, unit string)
}

// Bench runs n cycles of l as a benchmark (n is b.N): it reports
// allocations, fails b on the first error, and reports p50-ns and p99-ns
// (with Latency) and, for a contended shape, acq/s and fairness.
func (l Loop) Bench(b B, n int) Result {
	b.Helper()
	b.ReportAllocs()
	r, err := l.Count(context.Background(), n, b)
	if err != nil {
		b.Fatal(err)
	}
	if l.Latency {
		b.ReportMetric(float64(r.Percentile(50).Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(r.Percentile(99).Nanoseconds()), "p99-ns")
	}
	if l.Shape.OneKey && l.Shape.goroutines() > 1 {
		b.ReportMetric(r.PerSec(), "acq/s")
		if f, ok := r.Fairness(); ok {
			b.ReportMetric(f, "fairness")
		}
	}
	return r
}
