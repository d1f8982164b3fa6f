// Package redistest builds Redis clients for tests: one constructor per
// client library, each making a new client with its own connections, closed
// when the test ends.
package redistest

import (
	"context"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/redigo"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

func init() {
	// go-redis logs each failed dial on its own, to stderr. The tests stop
	// and pause servers on purpose, and check what the calls return; the
	// hundreds of lines buried a failing test's output in CI.
	redis.SetLogger(quiet{})
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// NewClient makes a new client to addr with its own connections.
type NewClient func(t testing.TB, addr string) redisclient.Client

// Clients are the client libraries every Redis backend is tested with, by
// name ("goredis", "redigo", "rueidis").
var Clients = []struct {
	Name string
	New  NewClient
}{
	{"goredis", GoRedis},
	{"redigo", Redigo},
	{"rueidis", Rueidis},
}

// GoRedisClient returns a raw go-redis client to addr, closed at cleanup.
// ContextTimeoutEnabled is on, so contexts bound commands.
func GoRedisClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		MaxRetries: -1, DialTimeout: time.Second, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return c
}

// GoRedis returns a go-redis adapter with its own client to addr.
func GoRedis(t testing.TB, addr string) redisclient.Client {
	return goredis.New(GoRedisClient(t, addr))
}

// RedigoPool returns a raw redigo pool to addr, closed at cleanup.
func RedigoPool(t testing.TB, addr string) *redigoredis.Pool {
	p := &redigoredis.Pool{
		MaxIdle:     64,
		IdleTimeout: time.Minute,
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigoredis.DialContext(ctx, "tcp", addr, redigoredis.DialConnectTimeout(time.Second))
		},
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Redigo returns a redigo adapter with its own pool to addr.
func Redigo(t testing.TB, addr string) redisclient.Client {
	return redigo.NewNamed(RedigoPool(t, addr), addr)
}

// RueidisClient returns a raw rueidis client to addr, closed at cleanup:
// one server, no client-side cache, no retries of its own (as
// client=rueidis dials it).
func RueidisClient(t testing.TB, addr string) rueidislib.Client {
	c, err := rueidislib.NewClient(rueidislib.ClientOption{InitAddress: []string{addr},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if c == nil {
		t.Fatalf("rueidis client to %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Rueidis returns a rueidis adapter with its own client to addr.
func Rueidis(t testing.TB, addr string) redisclient.Client {
	return rueidis.NewNamed(RueidisClient(t, addr), addr)
}
