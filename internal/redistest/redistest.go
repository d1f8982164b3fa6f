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

// RueidisFast returns the rueidis adapter of a client built the way the
// docs recommend (rueidis.NewClient, which sets AlwaysPipelining: no
// hand-over per command), to addr, closed at cleanup; otherwise as
// RueidisClient.
func RueidisFast(t testing.TB, addr string) redisclient.Client {
	c, a, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{addr},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if c != nil {
		t.Cleanup(c.Close)
	}
	if err != nil {
		t.Fatalf("rueidis client to %s: %v", addr, err)
	}
	return a
}

// Rueidis returns a rueidis adapter with its own client to addr.
func Rueidis(t testing.TB, addr string) redisclient.Client {
	return rueidis.NewNamed(RueidisClient(t, addr), addr)
}

// CheckSetNXPXGet checks a lock's acquire, redisclient.SetNXPXGet, on c
// under ctx: it sets an absent key with its TTL, leaves a held key as it
// is, and refuses a key of another type with WRONGTYPE, untouched. It uses
// the keys k and h of c's database.
func CheckSetNXPXGet(t *testing.T, ctx context.Context, c redisclient.Client) {
	t.Helper()
	if _, err := c.Del(ctx, "k", "h"); err != nil {
		t.Fatal(err)
	}
	ok, err := redisclient.SetNXPXGet(ctx, c, "k", "a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("SetNXPXGet on an absent key: %v, %v; want set", ok, err)
	}
	if ttl, err := c.Do(ctx, "PTTL", "k"); err != nil || ttl.(int64) <= 0 || ttl.(int64) > 60000 {
		t.Errorf("PTTL after SetNXPXGet with a minute: %v, %v", ttl, err)
	}
	ok, err = redisclient.SetNXPXGet(ctx, c, "k", "b", time.Minute)
	if err != nil || ok {
		t.Errorf("SetNXPXGet on a held key: %v, %v; want not set", ok, err)
	}
	if v, _, _ := c.Get(ctx, "k"); v != "a" {
		t.Errorf("held key's value after a second SetNXPXGet: %q, want \"a\"", v)
	}
	if _, err := c.Do(ctx, "HSET", "h", "f", "1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := redisclient.SetNXPXGet(ctx, c, "h", "b", time.Minute); ok || !redisclient.IsWrongType(err) {
		t.Errorf("SetNXPXGet on a hash: %v, %v; want WRONGTYPE", ok, err)
	}
	if v, err := c.Do(ctx, "HGET", "h", "f"); err != nil || v != "1" {
		t.Errorf("hash after SetNXPXGet: %v, %v; want untouched", v, err)
	}
}
