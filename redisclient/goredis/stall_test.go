package goredis_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
)

// stallValue is larger than every buffer between a client and a stalled
// proxy (socket buffers autotune to a few megabytes on loopback): a
// command carrying it blocks in its write until the proxy resumes.
var stallValue = strings.Repeat("x", 16<<20)

var setScript = redisclient.NewScript(`redis.call("SET", KEYS[1], ARGV[1]) return 1`)

// TestStalledWrites: callers whose commands are stuck in a write to a
// stalled connection return when their deadlines pass, and then reuse the
// slices they passed (keys, args), as a caller may. A go-redis client that
// ignores contexts goes on writing the abandoned commands in the
// background once the connection moves again: the adapter must have given
// it copies (-race reports the caller's writes otherwise, and the command
// sent would be the reused slice's). With ContextTimeoutEnabled nothing
// runs on after the call.
func TestStalledWrites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		contexts   bool // ContextTimeoutEnabled
		background bool // an abandoned command goes on after its call returns
	}{
		{"context-timeout", true, false},
		{"ignores-contexts", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testserver.RedisT(t, testserver.RedisOptions{})
			p := stalltest.Start(t, srv.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: tc.contexts,
				MaxRetries: -1, ReadTimeout: 20 * time.Second, WriteTimeout: 20 * time.Second})
			t.Cleanup(func() { rdb.Close() })
			c := goredis.New(rdb)
			ctx := context.Background()
			if _, err := c.SetNXPX(ctx, "warm", "v", time.Minute); err != nil {
				t.Fatal(err)
			}
			p.Stall()
			const timeout = 300 * time.Millisecond
			const bound = timeout + 2*time.Second // generous: -race under load
			calls := map[string]func(context.Context) error{
				"Do": func(ctx context.Context) error {
					args := []any{"SET", "do-key", stallValue, "PX", int64(60000)}
					_, err := c.Do(ctx, args...)
					for i := range args {
						args[i] = "reused"
					}
					return err
				},
				"Run": func(ctx context.Context) error {
					keys, args := []string{"run-key"}, []any{stallValue}
					_, err := c.Run(ctx, setScript, keys, args...)
					keys[0], args[0] = "reused", "reused"
					return err
				},
				"Del": func(ctx context.Context) error {
					keys := []string{stallValue, "del-key"}
					_, err := c.Del(ctx, keys...)
					keys[0], keys[1] = "reused", "reused"
					return err
				},
			}
			var wg sync.WaitGroup
			for name, call := range calls {
				wg.Go(func() {
					tctx, cancel := context.WithTimeout(ctx, timeout)
					defer cancel()
					start := time.Now()
					err := call(tctx)
					if err == nil || !redisclient.IsTransport(err) {
						t.Errorf("%s with its write stalled: %v, want a transport error", name, err)
					}
					if took := time.Since(start); took > bound {
						t.Errorf("%s with its write stalled returned after %v, want within its %v deadline", name, took, timeout)
					}
				})
			}
			wg.Wait()
			p.Resume()
			if !tc.background {
				return
			}
			// The abandoned commands finish: every connection is back in
			// the pool.
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if s := rdb.PoolStats(); s.TotalConns == s.IdleConns {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the abandoned commands never finished: %+v", rdb.PoolStats())
				}
			}
			direct := redistest.GoRedisClient(t, srv.Addr())
			if n, err := direct.StrLen(ctx, "do-key").Result(); err != nil || n != int64(len(stallValue)) {
				t.Errorf("STRLEN do-key = %d, %v: the abandoned SET was not the caller's", n, err)
			}
			if n, err := direct.Exists(ctx, "reused").Result(); err != nil || n != 0 {
				t.Errorf("EXISTS reused = %d, %v: an abandoned command sent the caller's reused slice", n, err)
			}
		})
	}
}
