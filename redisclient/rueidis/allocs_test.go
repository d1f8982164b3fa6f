package rueidis_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
)

var releaseScript = redisclient.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// BenchmarkRequests reports the allocations of the requests a lock cycle
// makes through the adapter (singleredis: SET NX PX GET, then the release
// script), one at a time, against a real server.
func BenchmarkRequests(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	c := redistest.Rueidis(b, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	token := []any{"token-0123456789"}
	keys := []string{"k"}
	b.Run("SetNXPXGet", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := redisclient.SetNXPXGet(ctx, c, "k", "token-0123456789", 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Run", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Run(ctx, releaseScript, keys, token...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SetNXPX", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.SetNXPX(ctx, "k", "token-0123456789", 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGroupedRequests reports the allocations per SET NX PX of the
// grouped adapter (group.go) with 32 callers at once, whose commands go
// in batches: each batch of two or more makes the slice of commands it
// hands to rueidis (16 bytes a command), shared by its callers.
func BenchmarkGroupedRequests(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	plain, closer, err := rueidis.Dial(context.Background(), registry.RedisServer{Addr: srv.Addr(), DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closer.Close() })
	c := plain.(redisclient.Grouper).Grouped()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.SetParallelism(32 / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.SetNXPX(ctx, "k", "token-0123456789", 10*time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
