package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
)

// TestPoolWaitKeepsDeadline: a command under a context with a deadline and
// no Done channel (the kit's request under a caller's context.Background:
// a Release, say) returns at that deadline while it waits for a pooled
// connection, all of them taken by a command hung on its server. go-redis
// keeps such a deadline on its sockets but, waiting for a connection,
// watches only the context's Done and its own PoolTimeout (here 11 s,
// ReadTimeout + 1 s): the adapter gives it a context whose Done closes at
// the deadline.
func TestPoolWaitKeepsDeadline(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := testserver.ProxyT(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, PoolSize: 1,
		MaxRetries: -1, ReadTimeout: 10 * time.Second})
	c := goredis.New(rdb)
	if _, err := c.SetNXPX(context.Background(), "warm", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	// The pool's one connection hangs under a command of the program's
	// own, until the client is closed.
	hung := make(chan struct{})
	go func() {
		defer close(hung)
		rdb.Get(context.Background(), "warm")
	}()
	t.Cleanup(func() {
		rdb.Close()
		<-hung
	})
	for deadline := time.Now().Add(10 * time.Second); rdb.PoolStats().IdleConns != 0 || rdb.PoolStats().TotalConns != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the hung command did not take the pool's connection: %+v", rdb.PoolStats())
		}
	}
	// 1.5 s: the kit's request begun with a second or more to go,
	// whose Done is its deadline's shared slot.
	err := stalltest.CheckGetByDeadline(t, c, "GET while the pool's one connection hangs", 1500*time.Millisecond, func() { rdb.Close() })
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET waiting for a connection past its deadline: %v, want context.DeadlineExceeded", err)
	}
}
