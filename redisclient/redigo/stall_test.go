package redigo_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

// stallValue is larger than every buffer between a client and a stalled
// proxy (socket buffers autotune to a few megabytes on loopback): a
// command carrying it blocks in its write until the proxy resumes.
var stallValue = strings.Repeat("x", 16<<20)

var setScript = redisclient.NewScript(`redis.call("SET", KEYS[1], ARGV[1]) return 1`)

// TestStalledWrites: callers whose commands are stuck in a write to a
// stalled connection return when their deadlines pass, and then reuse the
// slices and buffers they passed (keys, args), as a caller may. redigo's
// DoContext returns on the context while its own goroutine is still
// writing the command: the adapter must have given it copies (-race
// reports the caller's writes otherwise). The pool stays usable once the
// connection moves again.
func TestStalledWrites(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := stalltest.Start(t, srv.Addr())
	addr := p.Addr()
	pool := &redigoredis.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
		return redigoredis.DialContext(ctx, "tcp", addr, redigoredis.DialConnectTimeout(5*time.Second))
	}}
	t.Cleanup(func() { pool.Close() })
	c := redigo.NewNamed(pool, addr)
	ctx := context.Background()
	// Connections in the pool, as a busy client has: each call below
	// takes one that is already open.
	var warm sync.WaitGroup
	for range 3 {
		warm.Go(func() {
			if _, err := c.Do(ctx, "PING"); err != nil {
				t.Error(err)
			}
		})
	}
	warm.Wait()
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
			keys, value := []string{"run-key"}, []byte(stallValue)
			_, err := c.Run(ctx, setScript, keys, value)
			keys[0] = "reused"
			copy(value, bytes.Repeat([]byte("r"), len(value)))
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
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.SetNXPX(rctx, "after", "v", time.Minute); err != nil {
		t.Errorf("SetNXPX once the connection moves again: %v", err)
	}
	if _, ok, err := c.Get(rctx, "reused"); err != nil || ok {
		t.Errorf("GET reused = %v, %v: an abandoned command sent the caller's reused slice", ok, err)
	}
}
