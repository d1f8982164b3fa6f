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
