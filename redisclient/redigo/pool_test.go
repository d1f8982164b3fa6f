package redigo_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	redigolib "github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

// TestPoolWaitKeepsDeadline: a command under a context with a deadline and
// no Done channel (the kit's request under a caller's context.Background:
// a Release, say) returns at that deadline while it waits for a pooled
// connection of a pool that waits (Wait, MaxActive 1), its one connection
// taken by a command hung on its server. redigo watches only the
// context's Done while it waits: the adapter gives it one that closes at
// the deadline.
func TestPoolWaitKeepsDeadline(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := testserver.ProxyT(t, srv.Addr())
	pool := &redigolib.Pool{MaxActive: 1, Wait: true, DialContext: func(ctx context.Context) (redigolib.Conn, error) {
		return redigolib.DialContext(ctx, "tcp", p.Addr())
	}}
	c := redigo.NewNamed(pool, p.Addr())
	if _, err := c.SetNXPX(context.Background(), "warm", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	// The pool's one connection hangs under a command of the program's
	// own, until the proxy closes its connections.
	conn := pool.Get()
	hung := make(chan struct{})
	go func() {
		defer close(hung)
		conn.Do("GET", "warm")
	}()
	// unhang ends the hung command (the proxy closes its connections) and
	// gives its connection back to the pool.
	var once sync.Once
	unhang := func() {
		once.Do(func() {
			p.Close()
			<-hung
			conn.Close()
		})
	}
	t.Cleanup(func() {
		unhang()
		pool.Close()
	})
	// A GET still waiting at the end takes the connection once the hung
	// command gives it back.
	// 1.5 s: the kit's request begun with a second or more to go,
	// whose Done is its deadline's shared slot.
	err := stalltest.CheckGetByDeadline(t, c, "GET while the pool's one connection hangs", 1500*time.Millisecond, unhang)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET waiting for a connection past its deadline: %v, want context.DeadlineExceeded", err)
	}
}
