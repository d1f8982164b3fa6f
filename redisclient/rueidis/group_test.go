package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// groupedBehindProxy starts a redis-server behind a proxy and returns the
// grouped form of a rueidis adapter to the proxy, its connection open (a
// command answered) before the test slows or silences the proxy.
func groupedBehindProxy(t *testing.T) (redisclient.Client, *testserver.Proxy) {
	t.Helper()
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := testserver.ProxyT(t, srv.Addr())
	c := grouped(t, p.Addr())
	if _, err := c.SetNXPX(context.Background(), "warm", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	return c, p
}

// grouped returns the grouped form of a rueidis adapter to addr.
func grouped(t *testing.T, addr string) redisclient.Client {
	t.Helper()
	plain := redistest.Rueidis(t, addr)
	g, ok := plain.(redisclient.Grouper)
	if !ok {
		t.Fatal("the rueidis adapter does not implement redisclient.Grouper")
	}
	c := g.Grouped()
	if c.Addr() != plain.Addr() || c.String() != plain.String() {
		t.Errorf("Grouped() is %q at %q, want %q at %q (the same identity)", c, c.Addr(), plain, plain.Addr())
	}
	return c
}

// waitPending waits (bounded) until the proxy holds a request.
func waitPending(t *testing.T, p *testserver.Proxy) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); p.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the proxy")
		}
	}
}

// TestGroupedRepliesReachTheirCallers: while one command is in flight
// (held by a slow proxy), 32 callers send theirs; they go together, and
// each caller gets the reply to its own command.
func TestGroupedRepliesReachTheirCallers(t *testing.T) {
	c, p := groupedBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p.SetDelay(50 * time.Millisecond)
	first := make(chan error, 1)
	go func() { _, err := c.SetNXPX(ctx, "first", "v", time.Minute); first <- err }()
	waitPending(t, p)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			key, val := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
			if ok, err := redisclient.SetNXPXGet(ctx, c, key, val, time.Minute); err != nil || !ok {
				t.Errorf("SET NX PX GET %s: %v, %v; want set", key, ok, err)
				return
			}
			if v, ok, err := c.Get(ctx, key); err != nil || !ok || v != val {
				t.Errorf("GET %s = %q, %v, %v; want %q", key, v, ok, err, val)
			}
			if n, err := c.Del(ctx, key); err != nil || n != 1 {
				t.Errorf("DEL %s = %d, %v; want 1", key, n, err)
			}
		})
	}
	wg.Wait()
	if err := <-first; err != nil {
		t.Errorf("the command in flight: %v", err)
	}
}

// TestGroupedCallerLeaves: a caller waiting for the next batch whose
// deadline passes returns at once with its context's error, and its
// command is not sent; the callers beside it, with time to spare, get
// their replies.
func TestGroupedCallerLeaves(t *testing.T) {
	c, p := groupedBehindProxy(t)
	const tries = 5
	for try := 1; try <= tries; try++ {
		if callerLeaves(t, c, p, try) {
			return
		}
	}
	t.Fatalf("in none of %d tries did the short caller start in time to be sure it waited behind the command in flight", tries)
}

// callerLeaves is one try of TestGroupedCallerLeaves, on keys of its own.
// It reports false, having checked nothing, when the short caller's
// deadline may have come after the command in flight was answered: a
// loaded machine kept the test from running for most of those 600 ms, so
// the short command may have gone alone or in the next batch.
func callerLeaves(t *testing.T, c redisclient.Client, p *testserver.Proxy, try int) bool {
	ctx := context.Background()
	const delay = 300 * time.Millisecond // each way: the first command is in flight 600 ms
	p.SetDelay(delay)
	defer p.SetDelay(0)
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	first := make(chan error, 1)
	sent := time.Now() // no earlier: its answer comes 2 × delay later at the soonest
	go func() { _, err := c.SetNXPX(lctx, fmt.Sprintf("first%d", try), "v", time.Minute); first <- err }()
	// The first command must be the adapter's command in flight before the
	// short caller comes: the proxy holding a request is not enough (it
	// may be one of rueidis's own, such as a keep-alive PING, while the
	// first command's goroutine has not run yet, and the short command
	// would then go alone, sent at once: CI beside CPU hogs, stop 40).
	for deadline := time.Now().Add(5 * time.Second); !rueidis.InFlight(c); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first command never went in flight")
		}
	}
	waitPending(t, p)

	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 4 {
		wg.Go(func() {
			key := fmt.Sprintf("patient%d-%d", try, i)
			if ok, err := c.SetNXPX(lctx, key, "v", time.Minute); err != nil || !ok {
				t.Errorf("SetNXPX %s with 20 s to spare: %v, %v; want set", key, ok, err)
			}
		})
	}
	const short = 20 * time.Millisecond
	shortKey := fmt.Sprintf("short%d", try)
	sctx, scancel := context.WithTimeout(ctx, short)
	defer scancel()
	start := time.Now()
	_, err := c.SetNXPX(sctx, shortKey, "v", time.Minute)
	took := time.Since(start)
	if !start.Add(short).Before(sent.Add(2*delay - 50*time.Millisecond)) {
		t.Logf("try %d: the short caller started %v after the command in flight was sent, too late to be sure it waited behind it: trying again", try, start.Sub(sent))
		return false
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SetNXPX with a %v deadline behind a command in flight for %v: %v, want context.DeadlineExceeded", short, 2*delay, err)
	}
	// Generous (-race under load); without its own deadline the caller
	// would wait for the command in flight, 600 ms.
	if took > 2*delay-100*time.Millisecond {
		t.Errorf("SetNXPX with a %v deadline returned after %v: it waited for the batch", short, took)
	}
	wg.Wait()
	if err := <-first; err != nil {
		t.Errorf("the command in flight: %v", err)
	}
	p.SetDelay(0)
	if _, ok, err := c.Get(lctx, shortKey); err != nil || ok {
		t.Errorf("GET %s = %v, %v: the command of a caller that left before its batch went was sent", shortKey, ok, err)
	}
	return true
}

// TestGroupedDeadlineOnSilentServer: on a server that accepts and never
// answers, the command in flight and the commands waiting behind it each
// return within their own deadline with a transport error.
func TestGroupedDeadlineOnSilentServer(t *testing.T) {
	c, p := groupedBehindProxy(t)
	ctx := context.Background()
	p.Blackhole(true)
	const timeout = 200 * time.Millisecond
	const bound = timeout + 2*time.Second // generous: -race under load
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			tctx, cancel := context.WithTimeout(ctx, timeout+time.Duration(i)*50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, _, err := c.Get(tctx, "warm")
			if err == nil || !redisclient.IsTransport(err) {
				t.Errorf("Get %d on a silent server: %v, want a transport error", i, err)
			}
			if took := time.Since(start); took > bound+time.Duration(i)*50*time.Millisecond {
				t.Errorf("Get %d on a silent server returned after %v, want within its deadline", i, took)
			}
		})
	}
	wg.Wait()
}
