package rueidis_test

import (
	"context"
	"crypto/tls"
	"io"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
)

// dialNewClient makes a client of s with NewClient, as a program that
// builds its own rueidis client the recommended way does.
func dialNewClient(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	c, a, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{s.Addr}, TLSConfig: s.TLS,
		ForceSingleClient: true, DisableRetry: true, DisableCache: true, Dialer: net.Dialer{Timeout: s.DialTimeout}})
	if c == nil {
		return nil, nil, err
	}
	// ForceSingleClient: a client whose server did not answer comes with
	// the dial's error, and dials again on use.
	return a, closerFunc(c.Close), nil
}

// TestNewClientCancel: NewClient's adapter sends a command with a
// deadline without handing it to another goroutine (it knows the client
// pipelines always), and a command still returns soon after its context is
// cancelled with the server hung, before the connection is up (the
// handshake is watched), after, and while a TLS handshake waits.
func TestNewClientCancel(t *testing.T) {
	t.Parallel() // mostly waiting for a hung server, on servers of its own
	t.Run("hung", func(t *testing.T) { stalltest.RunCancelHung(t, dialNewClient, nil) })
	t.Run("before-deadline", func(t *testing.T) { stalltest.RunCancelBeforeDeadline(t, dialNewClient) })
	t.Run("tls", func(t *testing.T) { stalltest.RunCancelTLSHung(t, dialNewClient) })
}

// TestNewClientCost: NewClient's adapter says nothing about its cost and
// has the server's address as its identity; an adapter from NewNamed of a
// client made without NewClient says what each command costs more
// (MsgClientCost), and costs it: more allocations per command under a
// context that can be cancelled, the hand-over and channel of the watch.
func TestNewClientCost(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c, fast, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slow := rueidis.NewNamed(c, srv.Addr())
	if n := fast.(redisclient.CostNoter).CostNote(); n != "" {
		t.Errorf("NewClient's adapter notes a cost: %q", n)
	}
	if n := slow.(redisclient.CostNoter).CostNote(); n == "" {
		t.Error("NewNamed's adapter notes no cost, but it hands every command to another goroutine")
	}
	if !redisclient.SameServer(fast, slow) || fast.Addr() == "" {
		t.Errorf("NewClient's adapter has address %q, want the server's, %q", fast.Addr(), slow.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The fewest of a few runs, alternating: AllocsPerRun counts the
	// allocations of every goroutine, and goroutines other tests left
	// finishing in the background only add to it.
	f, s := math.Inf(1), math.Inf(1)
	for range 5 {
		for _, m := range []struct {
			a   redisclient.Client
			min *float64
		}{{fast, &f}, {slow, &s}} {
			*m.min = min(*m.min, testing.AllocsPerRun(200, func() {
				if _, err := m.a.SetNXPX(ctx, "k", "v", time.Minute); err != nil {
					t.Fatal(err)
				}
			}))
		}
	}
	t.Logf("allocations per SET NX PX: NewClient %.0f, NewNamed %.0f", f, s)
	if f >= s {
		t.Errorf("NewClient's adapter allocates %.0f per command, NewNamed's %.0f: the watch was not saved", f, s)
	}
}

// TestNewClientOptions: NewClient keeps the user's own dialer (DialCtxFn,
// or the deprecated DialFn) for every connection, and an adapter that
// must watch every command itself notes its cost as New's does: with
// DialFn, which takes no context, and with DisableAutoPipelining, which
// rueidis does not pipeline always.
func TestNewClientOptions(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	var dials atomic.Int32
	dialer := func(dst string, d *net.Dialer) (net.Conn, error) {
		dials.Add(1)
		return d.Dial("tcp", dst)
	}
	for _, c := range []struct {
		name  string
		opt   rueidislib.ClientOption
		dials bool // the user's dialer dials
		cost  bool // the adapter notes a cost
	}{
		{"DialCtxFn", rueidislib.ClientOption{DialCtxFn: func(_ context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return dialer(dst, d)
		}}, true, false},
		// The deprecated DialFn takes no context: the adapter watches
		// every command itself.
		{"DialFn", rueidislib.ClientOption{DialFn: func(dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return dialer(dst, d)
		}}, true, true},
		{"DisableAutoPipelining", rueidislib.ClientOption{DisableAutoPipelining: true}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dials.Store(0)
			opt := c.opt
			opt.InitAddress, opt.ForceSingleClient, opt.DisableCache = []string{srv.Addr()}, true, true
			cl, a, err := rueidis.NewClient(opt)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if ok, err := a.SetNX(ctx, "opt-"+c.name, "v"); err != nil || !ok {
				t.Fatalf("SetNX = %v, %v", ok, err)
			}
			if got := dials.Load() > 0; got != c.dials {
				t.Errorf("the user's dialer dialed %d times, want it used: %v", dials.Load(), c.dials)
			}
			if got := a.(redisclient.CostNoter).CostNote() != ""; got != c.cost {
				t.Errorf("cost noted: %v, want %v", got, c.cost)
			}
		})
	}
}
