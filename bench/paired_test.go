package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/lockswap/lockswap/internal/benchloop"
)

// redlockPairs are the serial Redlock pairs of issue 31 (lockswap ÷
// redsync on the same client, target ≤ 0.80) and, as "bound", the
// protocol's least work against the same redsync: a limit the floor
// misses is out of any Redlock client's reach; and what lockswap on
// redigo, which pipelines from the caller's goroutine as the floor does,
// costs over the floor.
var redlockPairs = []struct{ ours, base string }{
	{"lockswap-goredis", "redsync-goredis"},
	{"lockswap-redigo", "redsync-redigo"},
	{"lockswap-rueidis", "redsync-rueidis"},
	{"floor-redigo", "redsync-goredis"},
	{"floor-redigo", "redsync-redigo"},
	{"floor-redigo", "redsync-rueidis"},
	{"lockswap-redigo", "floor-redigo"},
}

// BenchmarkRedlockPaired runs each pair of redlockPairs serially on the
// first 3 and 5 servers, alternating blocks of 16 cycles
// (benchloop.Paired), so that the machine's latency modes, which switch
// for seconds at a time on a shared 2-core machine, hit both sides: the
// "ratio" metric is ours ÷ base ns per cycle. BenchmarkLocks runs the
// libraries one after the other, and its serial Redlock ratios range over
// 0.3–2 from round to round. Run (five redis-servers in
// LOCKSWAP_BENCH_REDIS):
//
//	go test -run '^$' -bench RedlockPaired -benchtime=2000x -count 6 .
func BenchmarkRedlockPaired(b *testing.B) {
	s := shared(b)
	for _, n := range []int{3, 5} {
		impls := map[string]impl{}
		for _, im := range redlockImpls(b, s, n) {
			impls[im.name] = im
		}
		for _, p := range redlockPairs {
			ours, base := impls[p.ours], impls[p.base]
			if ours.newCycle == nil || base.newCycle == nil {
				b.Fatalf("redlock%d has no %s or %s", n, p.ours, p.base)
			}
			b.Run(fmt.Sprintf("redlock%d/%s/%s", n, p.ours, p.base), func(b *testing.B) {
				benchloop.Paired(b, b.N, benchloop.Pair{
					Base: pairCycle(base.newCycle(b)), Ours: pairCycle(ours.newCycle(b)),
					BaseName: p.base, OursName: p.ours,
				})
			})
		}
	}
}

// pairCycle is c without a hold, as benchloop runs it.
func pairCycle(c cycleFunc) benchloop.Cycle {
	return func(ctx context.Context, key string) error { return c(ctx, key, nil) }
}
