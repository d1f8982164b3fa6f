package benchloop

import (
	"context"
	"slices"
	"time"
)

// Pair is two serial cycles measured in alternation. On a shared virtual
// machine the serial round trip switches between latency modes for
// seconds at a time, so that two benchmarks run one after the other can
// land in different modes; alternating puts both in the same ones.
type Pair struct {
	// Base runs first in every turn and is reported as
	// "<BaseName>-ns/cycle"; Ours is reported as "<OursName>-ns/cycle"
	// ("lockswap-ns/cycle" when OursName is ""), and "ratio" is ours ÷
	// base.
	Base, Ours         Cycle
	BaseName, OursName string
	// Block is how many cycles each runs in a turn (0 means 16).
	Block int
	// Median reports the median of the blocks' per-cycle times rather
	// than the mean over all cycles (with Block 1: the median cycle).
	Median bool
	// OneKey runs every cycle on one key rather than on a ring of
	// KeyRing distinct keys.
	OneKey bool
	// WarmAll warms both cycles on every key of the ring before the timed
	// cycles, rather than with 32 cycles each: the steady state of a key
	// ring, in which no key is new.
	WarmAll bool
}

// Paired runs n cycles (b.N) of p's two cycles, alternating in blocks,
// after warming both with 32 cycles each (or on every key: WarmAll), and
// reports each one's ns per
// cycle and their ratio.
func Paired(b B, n int, p Pair) {
	b.Helper()
	ctx := context.Background()
	keys := Keys(KeyRing)
	if p.OneKey {
		keys = keys[:1]
	}
	block := p.Block
	if block <= 0 {
		block = 16
	}
	cycles := [2]Cycle{p.Base, p.Ours}
	warm := 64
	if p.WarmAll {
		warm = max(warm, 2*len(keys))
	}
	for i := range warm {
		if err := cycles[i&1](ctx, keys[(i/2)%len(keys)]); err != nil {
			b.Fatal(err)
		}
	}
	var (
		spent  [2]time.Duration
		count  [2]int
		blocks [2][]float64 // ns per cycle of each block
	)
	if p.Median {
		for w := range blocks {
			blocks[w] = make([]float64, 0, n/block+1)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < n; {
		for w, cycle := range cycles {
			start := time.Now()
			j := 0
			for ; j < block && i < n; j, i = j+1, i+1 {
				if err := cycle(ctx, keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
			}
			if j == 0 {
				continue
			}
			took := time.Since(start)
			spent[w] += took
			count[w] += j
			if p.Median {
				blocks[w] = append(blocks[w], float64(took.Nanoseconds())/float64(j))
			}
		}
	}
	b.StopTimer()
	if count[0] == 0 || count[1] == 0 {
		return
	}
	var per [2]float64
	for w := range per {
		per[w] = float64(spent[w].Nanoseconds()) / float64(count[w])
		if p.Median {
			slices.Sort(blocks[w])
			per[w] = blocks[w][len(blocks[w])/2]
		}
	}
	b.ReportMetric(per[0], p.BaseName+"-ns/cycle")
	ours := p.OursName
	if ours == "" {
		ours = "lockswap"
	}
	b.ReportMetric(per[1], ours+"-ns/cycle")
	b.ReportMetric(per[1]/per[0], "ratio")
}

// Alternation is two cycles run by many goroutines at once (a shape such
// as Parallel(32)) in alternating windows of one duration: the
// throughput counterpart of [Pair]. Runs one after the other on a shared
// 2-core machine land in different states of the machine (another
// tenant's load, the servers' own rhythm) and give ranges as wide as
// 0.74–1.55 for one ratio; windows a fraction of a second long, taken in
// turns, see the same states.
type Alternation struct {
	Shape Shape
	// Base runs first in the even turns (the first, the third, ...) and
	// Ours in the odd ones, so that neither side always follows the other
	// (a window after the other side's may find the servers, caches and
	// the scheduler in another state than one after its own); Base is
	// reported as "<BaseName>-ns/op", Ours as "<OursName>-ns/op"
	// ("lockswap-ns/op" when OursName is ""): the medians over the turns
	// of each window's time per cycle (its elapsed time ÷ its cycles, as
	// Count measures).
	Base, Ours         func() Cycle
	BaseName, OursName string
	// Window is how long each side runs in a turn (0 means 150 ms), after
	// its goroutines have made their cycles and warmed up (Loop.Warm 4).
	Window time.Duration
}

// Alternate runs turns turns (b.N; an even number weighs both orders
// alike) of a's two sides and reports each side's median ns per cycle
// and, over the turns, the median ratio ("ratio", ours ÷ base within the
// turn) and its range ("ratio-min", "ratio-max"); with two turns or more
// also the median ratio of the turns the base went first in
// ("ratio-base-first") and of the others ("ratio-ours-first"), whose
// difference is the order's bias. A cycle's error fails b.
func Alternate(b B, turns int, a Alternation) {
	b.Helper()
	window := a.Window
	if window <= 0 {
		window = 150 * time.Millisecond
	}
	sides := [2]func() Cycle{a.Base, a.Ours}
	per := [2][]float64{make([]float64, 0, turns), make([]float64, 0, turns)}
	ratios := make([]float64, 0, turns)
	var byOrder [2][]float64 // the ratios of the turns the base went first in, and of the others
	b.ResetTimer()
	for turn := range turns {
		var took [2]float64
		for i := range sides {
			s := i ^ turn&1 // the base first in even turns, ours in odd ones
			r, err := Loop{Shape: a.Shape, NewCycle: sides[s], Warm: 4}.For(context.Background(), window, time.Second)
			if err != nil {
				b.Fatal(err)
				return
			}
			if r.Ops == 0 {
				b.Fatal("a window of ", window, " completed no cycle")
				return
			}
			took[s] = float64(r.Elapsed.Nanoseconds()) / float64(r.Ops)
			per[s] = append(per[s], took[s])
		}
		ratios = append(ratios, took[1]/took[0])
		byOrder[turn&1] = append(byOrder[turn&1], took[1]/took[0])
	}
	b.StopTimer()
	if len(ratios) == 0 {
		return
	}
	// The median of an even count is the upper of the two middle values.
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	ours := a.OursName
	if ours == "" {
		ours = "lockswap"
	}
	b.ReportMetric(median(per[0]), a.BaseName+"-ns/op")
	b.ReportMetric(median(per[1]), ours+"-ns/op")
	b.ReportMetric(slices.Min(ratios), "ratio-min")
	b.ReportMetric(slices.Max(ratios), "ratio-max")
	b.ReportMetric(median(ratios), "ratio")
	if len(byOrder[1]) > 0 {
		b.ReportMetric(median(byOrder[0]), "ratio-base-first")
		b.ReportMetric(median(byOrder[1]), "ratio-ours-first")
	}
}
