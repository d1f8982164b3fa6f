package rueidis_test

import (
	"context"
	"testing"
	"time"

	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// BenchmarkContextPaired measures what a context that can be cancelled
// costs rueidis itself, serially, on a client built as NewClient builds
// it (AlwaysPipelining): the cycle of a SET NX PX and a DEL, each under
// context.Background (rueidis waits for the reply alone) against the same
// under a context of its own per request, context.WithCancel ("cancel")
// or context.WithTimeout ("timeout"), which rueidis watches beside the
// reply (a select on its Done channel). The two alternate in blocks of 16
// cycles (benchloop.Paired); "ratio" is the second ÷ the first. No
// lockswap code runs: this is the share of the request bounds that is
// the client's. Run:
//
//	go test -run '^$' -bench ContextPaired -benchtime=6000x -count 8 ./redisclient/rueidis/
func BenchmarkContextPaired(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	rc, _, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{srv.Addr()},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)
	const token = "0123456789abcdef0123456789abcdef"
	cycle := func(bound func(context.Context) (context.Context, context.CancelFunc)) benchloop.Cycle {
		do := func(ctx context.Context, cmd rueidislib.Completed) error {
			if bound != nil {
				var cancel context.CancelFunc
				ctx, cancel = bound(ctx)
				defer cancel()
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
	for _, v := range []struct {
		name  string
		bound func(context.Context) (context.Context, context.CancelFunc)
	}{
		{"cancel", context.WithCancel},
		{"timeout", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 5*time.Second)
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			benchloop.Paired(b, b.N, benchloop.Pair{Base: cycle(nil), Ours: cycle(v.bound), BaseName: "background", OursName: v.name})
		})
	}
}
