package rueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
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
