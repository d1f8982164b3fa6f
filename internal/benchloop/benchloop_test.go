package benchloop_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/memlock"
)

// keyLog is a Cycle factory that records which goroutine (cycle) used
// which keys, and fails on two cycles inside one key at once.
type keyLog struct {
	mu      sync.Mutex
	next    int
	users   map[string]map[int]bool
	inside  map[string]int
	overlap error
}

func (k *keyLog) newCycle() benchloop.Cycle {
	k.mu.Lock()
	id := k.next
	k.next++
	k.mu.Unlock()
	return func(ctx context.Context, key string) error {
		k.mu.Lock()
		if k.users[key] == nil {
			k.users[key] = map[int]bool{}
		}
		k.users[key][id] = true
		k.inside[key]++
		if k.inside[key] > 1 && k.overlap == nil {
			k.overlap = fmt.Errorf("%d cycles inside %s at once", k.inside[key], key)
		}
		k.mu.Unlock()
		runtime.Gosched() // let another goroutine in while inside
		k.mu.Lock()
		k.inside[key]--
		k.mu.Unlock()
		return nil
	}
}

func newKeyLog() *keyLog {
	return &keyLog{users: map[string]map[int]bool{}, inside: map[string]int{}}
}

func TestCountRunsExactlyNOnDistinctKeysPerGoroutine(t *testing.T) {
	k := newKeyLog()
	r, err := benchloop.Loop{Shape: benchloop.Parallel(8), NewCycle: k.newCycle}.Count(context.Background(), 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, c := range r.PerGoroutine {
		sum += c
	}
	if r.Ops != 1000 || sum != 1000 || len(r.PerGoroutine) != 8 {
		t.Fatalf("Ops %d, per goroutine %v (sum %d), want 1000 over 8", r.Ops, r.PerGoroutine, sum)
	}
	if k.next != 8 {
		t.Errorf("NewCycle called %d times, want once per goroutine (8)", k.next)
	}
	for key, users := range k.users {
		if len(users) != 1 {
			t.Errorf("key %s used by %d goroutines, want 1", key, len(users))
		}
	}
	if k.overlap != nil {
		t.Error(k.overlap)
	}
	if r.Elapsed <= 0 || r.PerSec() <= 0 {
		t.Errorf("Elapsed %v, PerSec %v: want both positive", r.Elapsed, r.PerSec())
	}
}

func TestContendedSharesOneFreshKey(t *testing.T) {
	var keys []string
	for range 2 {
		k := newKeyLog()
		// The key log's overlap check is what a lock prevents; memlock
		// gives exclusion here.
		lk := memlock.New(memlock.NewStore())
		defer lk.Close()
		newCycle := func() benchloop.Cycle {
			logged := k.newCycle()
			return func(ctx context.Context, key string) error {
				l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
				if err != nil {
					return err
				}
				if err := logged(ctx, key); err != nil {
					return err
				}
				return l.Release(ctx)
			}
		}
		r, err := benchloop.Loop{Shape: benchloop.Contended(4), NewCycle: newCycle}.Count(context.Background(), 40, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(k.users) != 1 {
			t.Fatalf("contended run used %d keys, want 1", len(k.users))
		}
		for key := range k.users {
			keys = append(keys, key)
		}
		if k.overlap != nil {
			t.Error(k.overlap)
		}
		if _, ok := r.Fairness(); !ok {
			t.Errorf("no fairness after %d cycles over 4 goroutines", r.Ops)
		}
	}
	if keys[0] == keys[1] {
		t.Errorf("two contended runs shared key %s; each run wants a fresh one", keys[0])
	}
}

func TestErrorStopsEveryGoroutine(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int64
	newCycle := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			if calls.Add(1) == 50 {
				return boom
			}
			return nil
		}
	}
	r, err := benchloop.Loop{Shape: benchloop.Parallel(4), NewCycle: newCycle}.Count(context.Background(), 1_000_000, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if r.Ops >= 1_000_000 {
		t.Errorf("%d cycles ran after the error; the run should stop", r.Ops)
	}
}

// TestUnderBackground: a cycle wrapped by UnderBackground gets a context
// that cannot be cancelled (no Done channel), under a loop whose own
// context can be, and the cycle's error still stops the loop.
func TestUnderBackground(t *testing.T) {
	boom := errors.New("boom")
	var calls, cancellable atomic.Int64
	newCycle := func() benchloop.Cycle {
		return benchloop.UnderBackground(func(ctx context.Context, key string) error {
			if ctx.Done() != nil {
				cancellable.Add(1)
			}
			if calls.Add(1) == 20 {
				return boom
			}
			return nil
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := (benchloop.Loop{Shape: benchloop.Parallel(2), NewCycle: newCycle}).Count(ctx, 1000, nil); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if n := cancellable.Load(); n != 0 {
		t.Errorf("%d of %d cycles got a context that can be cancelled", n, calls.Load())
	}
}

func TestWarmRunsBeforeTheClock(t *testing.T) {
	var calls atomic.Int64
	timer := &fakeB{onReset: func() {
		if n := calls.Load(); n != 3*5 {
			t.Errorf("%d cycles before the clock started, want 3 goroutines × 5 warm-up cycles", n)
		}
	}}
	newCycle := func() benchloop.Cycle {
		return func(context.Context, string) error { calls.Add(1); return nil }
	}
	r, err := benchloop.Loop{Shape: benchloop.Parallel(3), NewCycle: newCycle, Warm: 5}.Count(context.Background(), 30, timer)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 30 || calls.Load() != 45 || timer.resets != 1 || timer.stops != 1 {
		t.Errorf("Ops %d, calls %d, resets %d, stops %d; want 30, 45, 1, 1", r.Ops, calls.Load(), timer.resets, timer.stops)
	}
}

func TestForEndsAndForgivesACycleCutOffByTheEnd(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	// One goroutine holds the key past the end of the run; the others
	// wait in Acquire until the grace ends and fail then.
	var holder atomic.Bool
	newCycle := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				return err
			}
			if holder.CompareAndSwap(false, true) {
				<-ctx.Done() // until the grace is over
			}
			return l.Release(context.Background())
		}
	}
	start := time.Now()
	r, err := benchloop.Loop{Shape: benchloop.Contended(3), NewCycle: newCycle, Latency: true}.For(context.Background(), 50*time.Millisecond, 50*time.Millisecond)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("err %v: a cycle cut off by the end is not an error", err)
	}
	if r.Ops < 1 || len(r.Latencies) != r.Ops {
		t.Errorf("Ops %d, %d latencies; want at least the holder's cycle, each with its latency", r.Ops, len(r.Latencies))
	}
	if took < 100*time.Millisecond || took > 10*time.Second {
		t.Errorf("run took %v, want the duration plus the grace (100ms), bounded", took)
	}
}

func TestForReportsAnErrorBeforeTheEnd(t *testing.T) {
	boom := errors.New("boom")
	newCycle := func() benchloop.Cycle {
		return func(context.Context, string) error { return boom }
	}
	_, err := benchloop.Loop{Shape: benchloop.Serial, NewCycle: newCycle}.For(context.Background(), time.Minute, time.Second)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}

func TestPercentileAndFairness(t *testing.T) {
	r := benchloop.Result{PerGoroutine: []int{2, 4}, Ops: 6}
	for i := 1; i <= 200; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 100}, {99, 198}, {100, 200}, {0.1, 1}} {
		if got := r.Percentile(c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if f, ok := r.Fairness(); !ok || f != 0.5 {
		t.Errorf("Fairness = %v, %v; want 0.5, true", f, ok)
	}
	if _, ok := (benchloop.Result{PerGoroutine: []int{1, 2}, Ops: 3}).Fairness(); ok {
		t.Error("Fairness of 3 cycles over 2 goroutines reported; too few to mean anything")
	}
	if (benchloop.Result{}).Percentile(50) != 0 {
		t.Error("Percentile without latencies is not 0")
	}
}

// fakeB records what Bench and Paired report.
type fakeB struct {
	resets, stops int
	onReset       func()
	metrics       map[string]float64
	fatal         []any
}

func (f *fakeB) ResetTimer() {
	f.resets++
	if f.onReset != nil {
		f.onReset()
	}
}
func (f *fakeB) StopTimer()        { f.stops++ }
func (f *fakeB) Helper()           {}
func (f *fakeB) Fatal(args ...any) { f.fatal = append(f.fatal, args...) }
func (f *fakeB) ReportAllocs()     {}
func (f *fakeB) ReportMetric(n float64, unit string) {
	if f.metrics == nil {
		f.metrics = map[string]float64{}
	}
	f.metrics[unit] = n
}

func TestBenchReportsWhatTheShapeMeasures(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	newCycle := func() benchloop.Cycle { return benchloop.TryCycle(lk, 10*time.Second) }
	b := &fakeB{}
	benchloop.Loop{Shape: benchloop.Serial, NewCycle: newCycle}.Bench(b, 20)
	if len(b.metrics) != 0 || len(b.fatal) != 0 {
		t.Errorf("serial without latency: metrics %v, fatal %v; want none", b.metrics, b.fatal)
	}
	b = &fakeB{}
	newWait := func() benchloop.Cycle { return benchloop.AcquireCycle(lk, 10*time.Second) }
	benchloop.Loop{Shape: benchloop.Contended(2), NewCycle: newWait, Latency: true}.Bench(b, 20)
	for _, unit := range []string{"p50-ns", "p99-ns", "acq/s"} {
		if b.metrics[unit] <= 0 {
			t.Errorf("%s = %v, want a positive figure (metrics %v)", unit, b.metrics[unit], b.metrics)
		}
	}
	if f, ok := b.metrics["fairness"]; !ok || f < 0 || f > 1 {
		t.Errorf("fairness = %v (reported %v), want a figure in [0, 1]", f, ok)
	}
}

func TestPairedReportsBothAndTheRatio(t *testing.T) {
	var base, ours atomic.Int64
	counting := func(n *atomic.Int64) benchloop.Cycle {
		return func(context.Context, string) error {
			n.Add(1)
			runtime.Gosched() // some work, so that a block takes measurable time
			return nil
		}
	}
	for _, median := range []bool{false, true} {
		base.Store(0)
		ours.Store(0)
		b := &fakeB{}
		benchloop.Paired(b, 64, benchloop.Pair{Base: counting(&base), Ours: counting(&ours), BaseName: "floor", Block: 4, Median: median})
		if base.Load() != 32+32 || ours.Load() != 32+32 {
			t.Errorf("median=%v: base ran %d, ours %d cycles; want 32 warm-up + 32 each", median, base.Load(), ours.Load())
		}
		for _, unit := range []string{"floor-ns/cycle", "lockswap-ns/cycle", "ratio"} {
			if _, ok := b.metrics[unit]; !ok {
				t.Errorf("median=%v: no %s in %v", median, unit, b.metrics)
			}
		}
		if got := b.metrics["lockswap-ns/cycle"] / b.metrics["floor-ns/cycle"]; got != b.metrics["ratio"] {
			t.Errorf("median=%v: ratio %v, want lockswap ÷ floor = %v", median, b.metrics["ratio"], got)
		}
	}
	// OursName names the second side (a client against another).
	b := &fakeB{}
	benchloop.Paired(b, 64, benchloop.Pair{Base: counting(&base), Ours: counting(&ours), BaseName: "goredis", OursName: "rueidis", Block: 4})
	if _, ok := b.metrics["lockswap-ns/cycle"]; ok || b.metrics["rueidis-ns/cycle"] == 0 || b.metrics["goredis-ns/cycle"] == 0 {
		t.Errorf("with OursName rueidis: metrics %v, want goredis-ns/cycle and rueidis-ns/cycle", b.metrics)
	}
}

// alternateWindow is the window of the tests' Alternate runs: long
// enough that each side completes cycles in it beside CPU hogs under the
// race detector, where a goroutine may wait several ms for a core (a
// window of 5 ms once completed none).
const alternateWindow = 50 * time.Millisecond

func TestAlternateRunsTheSidesInTurnsAndReportsTheRatioRange(t *testing.T) {
	var mu sync.Mutex
	var made []string // the side of each goroutine's cycle, in the order made
	side := func(name string) func() benchloop.Cycle {
		return func() benchloop.Cycle {
			mu.Lock()
			made = append(made, name)
			mu.Unlock()
			return func(context.Context, string) error {
				runtime.Gosched() // some work, so that a window takes measurable time
				return nil
			}
		}
	}
	b := &fakeB{}
	benchloop.Alternate(b, 3, benchloop.Alternation{Shape: benchloop.Parallel(2), Base: side("floor"), Ours: side("ours"),
		BaseName: "floor", Window: alternateWindow})
	if len(b.fatal) != 0 {
		t.Fatalf("fatal: %v", b.fatal)
	}
	want := []string{"floor", "floor", "ours", "ours", "ours", "ours", "floor", "floor", "floor", "floor", "ours", "ours"}
	if !slices.Equal(made, want) {
		t.Errorf("cycles made in the order %v, want %v: three turns, the base first in the first and the third, ours first in the second", made, want)
	}
	for _, unit := range []string{"floor-ns/op", "lockswap-ns/op", "ratio", "ratio-min", "ratio-max", "ratio-base-first", "ratio-ours-first"} {
		if b.metrics[unit] <= 0 {
			t.Errorf("%s = %v, want a positive figure (metrics %v)", unit, b.metrics[unit], b.metrics)
		}
	}
	if lo, mid, hi := b.metrics["ratio-min"], b.metrics["ratio"], b.metrics["ratio-max"]; lo > mid || mid > hi {
		t.Errorf("ratio %v outside its range [%v, %v]", mid, lo, hi)
	}

	// Each turn's ratio is ours ÷ base, whichever went first: with ours
	// a millisecond's sleep per cycle and the base a yield (some µs even
	// on a busy machine), both orders' ratios are far above 1.
	slow := func() benchloop.Cycle {
		return func(context.Context, string) error { time.Sleep(time.Millisecond); return nil }
	}
	b = &fakeB{}
	benchloop.Alternate(b, 2, benchloop.Alternation{Shape: benchloop.Parallel(2), Base: side("floor"), Ours: slow,
		BaseName: "floor", Window: alternateWindow})
	if len(b.fatal) != 0 {
		t.Fatalf("fatal: %v", b.fatal)
	}
	for _, unit := range []string{"ratio-base-first", "ratio-ours-first"} {
		if b.metrics[unit] <= 1 {
			t.Errorf("%s = %v with ours sleeping a millisecond per cycle, want above 1 (ours ÷ base; metrics %v)", unit, b.metrics[unit], b.metrics)
		}
	}

	// A cycle's error fails the benchmark.
	failing := func() benchloop.Cycle {
		return func(context.Context, string) error { return errors.New("server gone") }
	}
	b = &fakeB{}
	benchloop.Alternate(b, 2, benchloop.Alternation{Shape: benchloop.Parallel(2), Base: side("floor"), Ours: failing,
		BaseName: "floor", Window: alternateWindow})
	if len(b.fatal) == 0 || !strings.Contains(fmt.Sprint(b.fatal...), "server gone") {
		t.Errorf("fatal = %v, want the cycle's error", b.fatal)
	}
}

// A benchmark's serial, parallel and contended loops over one Locker.
func Example() {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	newCycle := func() benchloop.Cycle { return benchloop.AcquireCycle(lk, 10*time.Second) }
	for _, shape := range []benchloop.Shape{benchloop.Serial, benchloop.Parallel(4), benchloop.Contended(4)} {
		r, err := benchloop.Loop{Shape: shape, NewCycle: newCycle}.Count(context.Background(), 100, nil)
		fmt.Println(len(r.PerGoroutine), "goroutines,", r.Ops, "cycles, error:", err)
	}
	// Output:
	// 1 goroutines, 100 cycles, error: <nil>
	// 4 goroutines, 100 cycles, error: <nil>
	// 4 goroutines, 100 cycles, error: <nil>
}

func TestForTimesFromTheClockStartNotFromSetup(t *testing.T) {
	var calls atomic.Int64
	newCycle := func() benchloop.Cycle {
		return func(context.Context, string) error {
			if calls.Add(1) == 1 {
				time.Sleep(100 * time.Millisecond) // a warm-up longer than the run
			}
			return nil
		}
	}
	r, err := benchloop.Loop{Shape: benchloop.Serial, NewCycle: newCycle, Warm: 1}.For(context.Background(), 20*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 {
		t.Error("no cycles measured: the warm-up used up the run's duration")
	}
}
