package goredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
)

// TestWorkers: a command under a context that can be cancelled runs on one
// of the adapter's worker goroutines; the next command goes to a worker
// that waits instead of starting a goroutine (whose stack would grow again
// to go-redis's depth), and the workers of a burst of 16 concurrent
// commands end soon after it: none is left behind. With and without
// ContextTimeoutEnabled.
func TestWorkers(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, contexts := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: contexts})
		t.Cleanup(func() { rdb.Close() })
		c := goredis.New(rdb)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		setGet := func(key string) {
			if _, err := redisclient.SetNXPXGet(ctx, c, key, "v", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		stalltest.WaitWorkers(t, "workers left by earlier tests", func(n, _ int) bool { return n == 0 })

		// A second command reaches the waiting worker.
		stalltest.CheckWorkerReuse(t, fmt.Sprintf("contexts=%v", contexts), func() { setGet("first") }, func() { setGet("second") })

		stalltest.Burst(setGet)
		stalltest.WaitWorkers(t, "the burst's workers did not end", func(n, _ int) bool { return n == 0 })
	}
}
