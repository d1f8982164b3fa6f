package goredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// TestSetNXPXGet: a lock's acquire, which the adapter reads as an
// unparsed reply, sets an absent key with its TTL, leaves a held key as it
// is, and refuses a key of another type with WRONGTYPE, untouched: over
// RESP3 and RESP2, with and without ContextTimeoutEnabled, on a ring, on
// a client that cannot run a command built by the caller (the generic
// path), under a context that can be cancelled (the adapter's goroutine)
// and one that cannot.
func TestSetNXPXGet(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	clients := map[string]redis.Cmdable{
		"resp3":    redistest.GoRedisClient(t, srv.Addr()),
		"resp2":    redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, ContextTimeoutEnabled: true}),
		"defaults": redis.NewClient(&redis.Options{Addr: srv.Addr()}),
		"ring":     redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}, ContextTimeoutEnabled: true}),
	}
	resp3 := clients["resp3"].(*redis.Client)
	clients["no-process"] = doOnly{resp3, resp3}
	for name, c := range clients {
		if cl, ok := c.(interface{ Close() error }); ok && name != "resp3" {
			t.Cleanup(func() { cl.Close() })
		}
		a := goredis.New(c)
		if _, ok := a.(redisclient.SetGetter); !ok {
			t.Fatal("the go-redis adapter is not a redisclient.SetGetter")
		}
		t.Run(name+"/background", func(t *testing.T) { redistest.CheckSetNXPXGet(t, context.Background(), a) })
		t.Run(name+"/cancellable", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			redistest.CheckSetNXPXGet(t, ctx, a)
		})
	}
}

// doOnly is a go-redis client that runs arbitrary commands (Do) but not
// commands built by the caller (Process).
type doOnly struct {
	redis.Cmdable
	c *redis.Client
}

func (d doOnly) Do(ctx context.Context, args ...any) *redis.Cmd { return d.c.Do(ctx, args...) }

// TestSetNXPXGetAllocs: the acquire costs about what go-redis's own SetNX
// costs (SET NX PX, answered OK), not the redis.Nil path of a generic
// command answered nil (a chain of errors.As in go-redis's retry checks,
// about 17 allocations more).
func TestSetNXPXGetAllocs(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	a := goredis.New(raw)
	ctx := context.Background()
	n := 0
	key := func() string { n++; return fmt.Sprint("allocs:", n) }
	measure := func(f func()) float64 {
		best := -1.0
		for range 5 { // the least of 5: a GC or a pool refill adds to a run
			if v := testing.AllocsPerRun(200, f); best < 0 || v < best {
				best = v
			}
		}
		return best
	}
	floor := measure(func() {
		if ok, err := raw.SetNX(ctx, key(), "v", time.Minute).Result(); err != nil || !ok {
			t.Fatalf("SetNX: %v %v", ok, err)
		}
	})
	ours := measure(func() {
		if ok, err := redisclient.SetNXPXGet(ctx, a, key(), "v", time.Minute); err != nil || !ok {
			t.Fatalf("SetNXPXGet: %v %v", ok, err)
		}
	})
	generic := measure(func() { // the same command through the adapter's Do
		if ok, err := redisclient.SetNXPXGet(ctx, struct{ redisclient.Client }{a}, key(), "v", time.Minute); err != nil || !ok {
			t.Fatalf("SetNXPXGet through Do: %v %v", ok, err)
		}
	})
	t.Logf("allocations per acquire: go-redis SetNX %v, the adapter's SetNXPXGet %v, the same through Do %v", floor, ours, generic)
	if ours > floor+4 {
		t.Errorf("SetNXPXGet allocates %v per acquire, go-redis's SetNX %v: want at most 4 more", ours, floor)
	}
}
