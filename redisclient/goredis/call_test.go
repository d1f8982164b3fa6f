package goredis_test

import (
	"context"
	"errors"
	"fmt"
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

// slowScript keeps the server busy for ARGV[1] microseconds, then answers
// ARGV[2].
var slowScript = redisclient.NewScript(`
local t = redis.call("TIME")
local start = t[1] * 1000000 + t[2]
repeat t = redis.call("TIME") until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1])
return ARGV[2]`)

var echoScript = redisclient.NewScript(`return ARGV[1]`)

// TestAbandonedCallNotReused: a script call (the release's path) whose
// caller's context is cancelled while the server runs it returns at once,
// and what the adapter keeps for it (the pooled call, with its copies of
// the arguments and the reply it will write) is not handed to another
// caller until its command has returned: calls made meanwhile, which
// finish at the same time as the abandoned one, each get their own reply
// (and -race sees no shared write). With ContextTimeoutEnabled and
// without (go-redis's default).
func TestAbandonedCallNotReused(t *testing.T) {
	t.Run("context-timeout", func(t *testing.T) { abandonedCallNotReused(t, true) })
	t.Run("defaults", func(t *testing.T) { abandonedCallNotReused(t, false) })
}

func abandonedCallNotReused(t *testing.T, contexts bool) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: contexts, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { rdb.Close() })
	slow := goredis.New(rdb)
	others := goredis.New(redistest.GoRedisClient(t, srv.Addr()))
	bg := context.Background()
	for _, s := range []*redisclient.Script{slowScript, echoScript} { // load both: no NOSCRIPT round below
		if _, err := others.Run(bg, s, nil, 0, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := slow.Run(bg, echoScript, nil, "warm"); err != nil { // slow's one connection is up
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := slow.Run(ctx, slowScript, nil, int64(300_000), "abandoned")
		errc <- err
	}()
	// Cancel once the command holds slow's only connection: go-redis no
	// longer looks at the context then.
	for until := time.Now().Add(5 * time.Second); rdb.PoolStats().IdleConns != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("the slow script never took the connection")
		}
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call had not returned 5 s after its cancellation")
	}

	// These wait behind the slow script on the server, and return as the
	// abandoned command does.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			want := fmt.Sprintf("reply-%d", i)
			v, err := others.Run(cancellable(t), echoScript, nil, want)
			if err != nil || v != want {
				t.Errorf("call %d: %v, %v; want its own reply %q", i, v, err, want)
			}
		})
	}
	wg.Wait()
	for until := time.Now().Add(5 * time.Second); rdb.PoolStats().IdleConns != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("the abandoned script never returned its connection")
		}
	}
	for i := range 16 {
		want := fmt.Sprintf("after-%d", i)
		if v, err := slow.Run(cancellable(t), echoScript, nil, want); err != nil || v != want {
			t.Errorf("call %d after the abandoned one returned: %v, %v; want %q", i, v, err, want)
		}
	}
}

// cancellable returns a context that can be cancelled, as a caller's usually is,
// so that the adapter takes its pooled path.
func cancellable(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// lateDoneCtx has a deadline its Done does not keep: Done closes only
// when its parent is cancelled, as a context of another library might.
type lateDoneCtx struct {
	context.Context
	deadline time.Time
}

func (c lateDoneCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// TestCallKeepsDeadlineOfLateDone: on a client that ignores contexts
// (go-redis's defaults) a lock's command returns at its context's
// deadline with context.DeadlineExceeded even when the context's Done has
// not closed then, and the server is busy for far longer.
func TestCallKeepsDeadlineOfLateDone(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := goredis.New(rdb)
	busy := goredis.New(redistest.GoRedisClient(t, srv.Addr()))
	bg := context.Background()
	if _, err := c.Run(bg, slowScript, nil, 0, "warm"); err != nil { // c's connection is up, the script loaded
		t.Fatal(err)
	}
	busyFor := 3 * stalltest.CancelBound
	errc := make(chan error, 1)
	go func() {
		_, err := busy.Run(bg, slowScript, nil, busyFor.Microseconds(), "busy")
		errc <- err
	}()
	t.Cleanup(func() { <-errc })
	// The server is busy once it no longer answers a PING in time.
	for until := time.Now().Add(5 * time.Second); ; {
		pctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		_, err := busy.Do(pctx, "PING")
		cancel()
		if err != nil {
			break
		}
		if time.Now().After(until) {
			t.Fatal("the server never got busy")
		}
	}
	const timeout = 100 * time.Millisecond
	ctx := lateDoneCtx{Context: cancellable(t), deadline: time.Now().Add(timeout)}
	for name, call := range map[string]func() error{
		"SetNXPXGet": func() error {
			_, err := c.(redisclient.SetGetter).SetNXPXGet(ctx, "late", "v", time.Minute)
			return err
		},
		"Run": func() error { _, err := c.Run(ctx, echoScript, nil, "late"); return err },
	} {
		start := time.Now()
		err := call()
		if took := time.Since(start); took > timeout+stalltest.CancelBound {
			t.Errorf("%s returned %v after it began, want within its %v deadline and %v", name, took, timeout, stalltest.CancelBound)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want context.DeadlineExceeded", name, err)
		}
	}
}
