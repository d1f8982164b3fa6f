package redistest

import (
	"context"
	"testing"
	"time"
)

// PairedCycles runs b.N serial cycles, floor and ours alternating in blocks
// of 16 on the keys (used in turn), and reports each one's ns per cycle and
// their ratio (ours ÷ floor). On a shared virtual machine the serial round
// trip switches between latency modes for seconds at a time, so that two
// sub-benchmarks run one after the other can land in different modes;
// alternating puts both in the same ones. Both are warmed first.
func PairedCycles(b *testing.B, keys []string, floor, ours func(ctx context.Context, key string) error) {
	ctx := context.Background()
	cycles := [2]func(context.Context, string) error{floor, ours}
	for i := range 64 { // warm both
		if err := cycles[i&1](ctx, keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
	}
	var spent [2]time.Duration
	var count [2]int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		for w := range cycles {
			start := time.Now()
			j := 0
			for ; j < 16 && i < b.N; j, i = j+1, i+1 {
				if err := cycles[w](ctx, keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
			}
			spent[w] += time.Since(start)
			count[w] += j
		}
	}
	if count[0] > 0 && count[1] > 0 {
		f := float64(spent[0].Nanoseconds()) / float64(count[0])
		o := float64(spent[1].Nanoseconds()) / float64(count[1])
		b.ReportMetric(f, "floor-ns/cycle")
		b.ReportMetric(o, "lockswap-ns/cycle")
		b.ReportMetric(o/f, "ratio")
	}
}
