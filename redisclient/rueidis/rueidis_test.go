package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
)

func TestNilClient(t *testing.T) {
	if rueidis.New(nil) != nil || rueidis.NewNamed(nil, "x") != nil {
		t.Error("adapters of nil clients must be nil, so that backends reject them")
	}
}

// TestAddr: NewNamed's address is the client's identity; New's is unknown
// (rueidis does not tell the database).
func TestAddr(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redistest.RueidisClient(t, srv.Addr())
	if a := rueidis.New(c).Addr(); a != "" {
		t.Errorf("New(c).Addr() = %q, want unknown", a)
	}
	host, port, _ := net.SplitHostPort(srv.Addr())
	named := rueidis.NewNamed(c, "LOCALHOST:"+port+"/2")
	if a := named.Addr(); a != "localhost:"+port+"/2" {
		t.Errorf("NewNamed(LOCALHOST:%s/2).Addr() = %q", port, a)
	}
	if s := rueidis.NewNamed(c, host+":"+port).String(); !strings.Contains(s, "rueidis") || !strings.Contains(s, srv.Addr()) {
		t.Errorf("String() = %q, want the library and address", s)
	}
}

// TestDeadlineOnSilentServer: a request to a server that accepts and never
// answers returns a transport error within its context's deadline, on a
// connection made before the server fell silent and on a fresh client.
func TestDeadlineOnSilentServer(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := testserver.ProxyT(t, srv.Addr())
	c := redistest.Rueidis(t, p.Addr())
	ctx := context.Background()
	if _, err := c.SetNXPX(ctx, "k", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	const timeout = 200 * time.Millisecond
	// Generous: the machine runs -race under load; the defect waits for
	// rueidis's own 10 s connection timeout.
	const bound = timeout + 2*time.Second
	check := func(name string, f func(ctx context.Context) error) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err := f(tctx)
		if err == nil || errors.Is(err, redisclient.ErrReply) || !redisclient.IsTransport(err) {
			t.Errorf("%s on a silent server: %v, want a transport error", name, err)
		}
		if elapsed := time.Since(start); elapsed > bound {
			t.Errorf("%s on a silent server returned after %v, want within its %v deadline", name, elapsed, timeout)
		}
	}
	check("Get", func(ctx context.Context) error { _, _, err := c.Get(ctx, "k"); return err })
	check("Run", func(ctx context.Context) error {
		_, err := c.Run(ctx, redisclient.NewScript(`return 1`), nil)
		return err
	})
	check("Do", func(ctx context.Context) error {
		_, err := c.Do(ctx, "SET", "k", "v", "NX", "PX", 1000, "GET")
		return err
	})

	// Cancellation ends a request as its deadline does.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.SetNXPX(cctx, "k2", "v", time.Minute); done <- err }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("SetNXPX cancelled on a silent server: %v, want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Error("SetNXPX on a silent server did not return when its context was cancelled")
	}
}

// TestRESP3RepliesAsRESP2: rueidis speaks RESP3 where the server does; the
// adapter gives its replies as the other adapters do: a map as key, value
// pairs.
func TestRESP3RepliesAsRESP2(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redistest.Rueidis(t, srv.Addr())
	ctx := context.Background()
	if _, err := c.Do(ctx, "HSET", "h", "b", "2", "a", "1"); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "HGETALL", "h")
	if arr, ok := v.([]any); err != nil || !ok || len(arr) != 4 || arr[0] != "a" || arr[1] != "1" || arr[2] != "b" || arr[3] != "2" {
		t.Errorf("HGETALL = %#v, %v; want [a 1 b 2]", v, err)
	}
}

// TestOneCallersDeadlineSparesTheOthers: rueidis pipelines the commands of
// every caller on one connection, so a caller whose deadline passes must
// give up alone: another caller's request in flight on the same
// connection, with time to spare, gets its reply. The client is the one
// client=rueidis URLs open. (Without AlwaysPipelining, rueidis closes a
// connection whose lone request's deadline passes.)
func TestOneCallersDeadlineSparesTheOthers(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := testserver.ProxyT(t, srv.Addr())
	c, closer, err := rueidis.Dial(context.Background(), registry.RedisServer{Addr: p.Addr(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	ctx := context.Background()
	if _, err := c.SetNXPX(ctx, "k", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	// rueidis spreads requests over a few connections (2 on 2 cores) at
	// random: open them all before the proxy slows down.
	for range 32 {
		if _, _, err := c.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	const delay = 150 * time.Millisecond // each way
	p.SetDelay(delay)

	short := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		_, _, err := c.Get(sctx, "k")
		short <- err
	}()
	// Wait (bounded) until the short caller's request is held in the
	// proxy, then send the patient one on the same connection.
	waitPending(t, p)
	// 8 patient callers: at random, some share the short one's
	// connection.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, ok, err := c.Get(lctx, "k")
			if err != nil || !ok || v != "v" {
				t.Errorf("Get with 10 s to spare, beside a caller whose 20 ms deadline passed: %q, %v, %v; want \"v\"", v, ok, err)
			}
		})
	}
	wg.Wait()
	if err := <-short; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with a 20 ms deadline through a %v proxy: %v, want context.DeadlineExceeded", 2*delay, err)
	}
}

// TestSetNXPXGet: a lock's acquire, which the adapter builds with rueidis's
// typed builder (from typed arguments, redisclient.SetGetter, and from
// the generic Do's), sets an absent key with its TTL, leaves a held key as
// it is, and refuses a key of another type with WRONGTYPE, untouched.
func TestSetNXPXGet(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	typed := redistest.Rueidis(t, srv.Addr())
	if _, ok := typed.(redisclient.SetGetter); !ok {
		t.Fatal("the rueidis adapter is not a redisclient.SetGetter")
	}
	for _, c := range []redisclient.Client{typed, struct{ redisclient.Client }{typed}} {
		t.Run(fmt.Sprintf("%T", c), func(t *testing.T) { redistest.CheckSetNXPXGet(t, context.Background(), c) })
	}
}
