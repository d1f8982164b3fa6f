package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/memlock"
)

// redlockPairs are the serial Redlock pairs of issue 31 (lockswap ÷
// redsync on the same client, target ≤ 0.80); the protocol's least work
// (floor-redigo) against the same redsync, the room the protocol leaves
// under that limit; what lockswap on redigo, which pipelines from the
// caller's goroutine as the floor does, costs over the floor; the floor
// against a second floor of its own (A/A), the bias of the pairing itself
// (the base always runs first in a turn); and floor-redigo-kit, the floor
// with one memlock TryAcquire and Release (lockswap's kit, no network,
// about 1.1–1.5 µs in a warm loop) before each cycle, against the floor
// and against lockswap: what the kit's CPU costs between round trips,
// where caches and branch predictors may have gone cold.
var redlockPairs = []struct{ ours, base string }{
	{"lockswap-goredis", "redsync-goredis"},
	{"lockswap-redigo", "redsync-redigo"},
	{"lockswap-rueidis", "redsync-rueidis"},
	{"floor-redigo", "redsync-goredis"},
	{"floor-redigo", "redsync-redigo"},
	{"floor-redigo", "redsync-rueidis"},
	{"lockswap-redigo", "floor-redigo"},
	{"floor-redigo", "floor-redigo"},
	{"floor-redigo-kit", "floor-redigo"},
	{"lockswap-redigo", "floor-redigo-kit"},
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
		if floor, ok := impls["floor-redigo"]; ok {
			impls["floor-redigo-kit"] = withKit(b, floor)
		}
		for _, p := range redlockPairs {
			ours, base := impls[p.ours], impls[p.base]
			if ours.newCycle == nil || base.newCycle == nil {
				b.Fatalf("redlock%d has no %s or %s", n, p.ours, p.base)
			}
			oursName := p.ours
			if oursName == p.base {
				oursName += "-again" // A/A: a metric of its own
			}
			b.Run(fmt.Sprintf("redlock%d/%s/%s", n, p.ours, p.base), func(b *testing.B) {
				benchloop.Paired(b, b.N, benchloop.Pair{
					Base: pairCycle(base.newCycle(b)), Ours: pairCycle(ours.newCycle(b)),
					BaseName: p.base, OursName: oursName,
				})
			})
		}
	}
}

// withKit is im with one memlock TryAcquire and Release of the key (a
// Locker of its own, closed at b's end) before each cycle.
func withKit(b *testing.B, im impl) impl {
	lk := memlock.New(memlock.NewStore())
	b.Cleanup(func() { lk.Close() })
	return impl{im.name + "-kit", func(b *testing.B) cycleFunc {
		cycle := im.newCycle(b)
		return func(ctx context.Context, key string, hold func() error) error {
			l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
			if err != nil {
				return err
			}
			if err := l.Release(ctx); err != nil {
				return err
			}
			return cycle(ctx, key, hold)
		}
	}}
}

// pairCycle is c without a hold, as benchloop runs it.
func pairCycle(c cycleFunc) benchloop.Cycle {
	return func(ctx context.Context, key string) error { return c(ctx, key, nil) }
}

// turnsPairs are issue 31's 32-goroutine targets (lockswap ÷ the floor of
// the same client, limit 1.10) measured in turns, and the floor against
// itself (A/A): the bias of the method, to read beside them; and each
// client's bounded floor (bounded_test.go: a token per acquisition and a
// context.WithTimeout per command) against its floor and against lockswap
// on the same client: what a token and a deadline per command cost a user
// of the raw client, and what lockswap costs beyond that.
var turnsPairs = []struct{ ours, base string }{
	{"lockswap-goredis", "floor-goredis"},
	{"lockswap-goredis", "floor-goredis-default"},
	{"lockswap-goredis-default", "floor-goredis-default"},
	{"lockswap-redigo", "floor-redigo"},
	{"lockswap-rueidis", "floor-rueidis"},
	{"lockswap-rueidis", "floor-rueidis-default"},
	{"floor-rueidis", "floor-rueidis"},
	{"bounded-goredis", "floor-goredis"},
	{"lockswap-goredis", "bounded-goredis"},
	{"bounded-redigo", "floor-redigo"},
	{"lockswap-redigo", "bounded-redigo"},
	{"bounded-rueidis", "floor-rueidis"},
	{"lockswap-rueidis", "bounded-rueidis"},
}

// BenchmarkTurns runs each pair of turnsPairs on 32 goroutines and
// distinct keys of the first server, the two sides in alternating windows
// of 150 ms, the base first in every other turn (benchloop.Alternate), b.N
// turns: "ratio" is the median over the turns of ours ÷ base time per
// cycle within a turn. BenchmarkLocks runs the libraries one after the
// other, and its 32-goroutine ratios range over 0.7–2 from round to round
// on the 2-core test machine; in turns they repeat within a few percent.
// Each pair runs twice: under the loop's context, which can be cancelled
// (as a server's request context can; the floors' clients ignore a
// cancellation, lockswap returns within lockswap.DeadlineGrace of one),
// and under context.Background ("background"). bench/run.sh runs it
// after BenchmarkLocks, and the report judges issue 31's 32-goroutine
// targets on it too. Run (five redis-servers in LOCKSWAP_BENCH_REDIS):
//
//	go test -run '^$' -bench Turns -benchtime=10x -count 3 .
func BenchmarkTurns(b *testing.B) {
	s := shared(b)
	impls := map[string]impl{}
	for _, im := range append(redis1Impls(b, s), boundedImpls(s)...) {
		impls[im.name] = im
	}
	for _, p := range turnsPairs {
		ours, base := impls[p.ours], impls[p.base]
		if ours.newCycle == nil || base.newCycle == nil {
			b.Fatalf("redis1 has no %s or %s", p.ours, p.base)
		}
		oursName := p.ours
		if oursName == p.base {
			oursName += "-again" // A/A: a metric of its own
		}
		for _, ctx := range []string{"cancellable", "background"} {
			newSide := func(b *testing.B, im impl) func() benchloop.Cycle {
				return func() benchloop.Cycle {
					cycle := pairCycle(im.newCycle(b))
					if ctx == "background" {
						return benchloop.UnderBackground(cycle)
					}
					return cycle
				}
			}
			b.Run(fmt.Sprintf("redis1/%s/%s/%s", ctx, p.ours, p.base), func(b *testing.B) {
				benchloop.Alternate(b, b.N, benchloop.Alternation{Shape: benchloop.Parallel(32),
					Base: newSide(b, base), Ours: newSide(b, ours), BaseName: p.base, OursName: oursName})
			})
		}
	}
}
