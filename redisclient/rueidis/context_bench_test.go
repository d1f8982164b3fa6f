package rueidis_test

import (
	"context"
	"testing"
	"time"

	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// BenchmarkContextPaired measures what a context per request costs
// serially on rueidis, on a client built as NewClient builds it
// (AlwaysPipelining), with no lockswap code: the cycle of a SET NX PX and
// a DEL, each under context.Background (rueidis waits for the reply
// alone), against the same with a context made per request,
// context.WithCancel ("cancel") or context.WithTimeout ("timeout"), and
// given to rueidis, which then waits in a select beside its Done channel;
// "made-only" makes and cancels a context.WithTimeout per request but
// gives rueidis context.Background, which tells the making (Go's) from
// the watching (rueidis's); "again" is context.Background on both
// sides (A/A), the pairing's own bias; "request" gives rueidis the
// kit's own request context (attempt.Request, ended at its Locker's Close
// too, as an acquire's is). The two sides alternate in blocks of 16
// cycles (benchloop.Paired); "ratio" is the second ÷ the first. The
// "parallel/" variants run the same cycles on 32 goroutines and distinct
// keys, the two sides in alternating windows (benchloop.Alternate). Run:
//
//	go test -run '^$' -bench ContextPaired -benchtime=6000x -count 8 ./redisclient/rueidis/
//	go test -run '^$' -bench 'ContextPaired/parallel' -benchtime=20x -count 3 ./redisclient/rueidis/
func BenchmarkContextPaired(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	rc, _, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{srv.Addr()},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)
	const token = "0123456789abcdef0123456789abcdef"
	cycle := func(bound func(context.Context) (context.Context, context.CancelFunc), give bool) benchloop.Cycle {
		do := func(ctx context.Context, cmd rueidislib.Completed) error {
			if bound != nil {
				bctx, cancel := bound(ctx)
				defer cancel()
				if give {
					ctx = bctx
				}
			}
			return rc.Do(ctx, cmd).Error()
		}
		return func(ctx context.Context, key string) error {
			if err := do(ctx, rc.B().Set().Key(key).Value(token).Nx().PxMilliseconds(10_000).Build()); err != nil {
				return err
			}
			return do(ctx, rc.B().Del().Key(key).Build())
		}
	}
	timeout := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 5*time.Second)
	}
	closing, closeAll := context.WithCancel(context.Background())
	deadlines := attempt.NewDeadlines(closing)
	b.Cleanup(func() { closeAll(); deadlines.Close() })
	request := func(ctx context.Context) (context.Context, context.CancelFunc) {
		r := attempt.New(ctx, attempt.Timeout).EndAtClose(deadlines)
		return r, r.Stop
	}
	variants := []struct {
		name  string
		bound func(context.Context) (context.Context, context.CancelFunc)
		give  bool // rueidis gets the context made
	}{
		{"again", nil, false},
		{"cancel", context.WithCancel, true},
		{"timeout", timeout, true},
		{"made-only", timeout, false},
		{"request", request, true},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			benchloop.Paired(b, b.N, benchloop.Pair{Base: cycle(nil, false), Ours: cycle(v.bound, v.give), BaseName: "background", OursName: v.name})
		})
	}
	for _, v := range variants {
		b.Run("parallel/"+v.name, func(b *testing.B) {
			benchloop.Alternate(b, b.N, benchloop.Alternation{Shape: benchloop.Parallel(32),
				Base:     func() benchloop.Cycle { return cycle(nil, false) },
				Ours:     func() benchloop.Cycle { return cycle(v.bound, v.give) },
				BaseName: "background", OursName: v.name})
		})
	}
}
