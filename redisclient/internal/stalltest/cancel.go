package stalltest

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// CancelBound is how long a command may go on once its context is
// cancelled: generous (-race under load), and far below the client
// libraries' own timeouts (3 to 10 s) that a command ignoring the
// cancellation waits for.
const CancelBound = time.Second

// farDeadline is the deadline of the contexts that are cancelled well
// before it: a command that waits for it instead of the cancellation
// overruns CancelBound by far.
const farDeadline = 10 * CancelBound

// cancelKinds are the contexts the cancel checks cancel: without a
// deadline, and with a deadline far off (the kit's request contexts have
// one, lockswap.RequestTimeout at most, and end Grace after the caller's
// cancellation).
var cancelKinds = []struct {
	name string
	make func() (context.Context, context.CancelFunc)
}{
	{"no-deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	{"far-deadline", func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), farDeadline)
	}},
}

// hungServers are the servers of the cancel checks: a listener that never
// answers (the connection never comes up) and a redis-server behind a
// proxy that stops answering (on a connection made before). start returns
// the server's address, hang, which makes it hang, and started, which
// reports that a request has reached it since hang.
var hungServers = []struct {
	name  string
	start func(t *testing.T) (addr string, hang func(), started func() bool)
}{
	{"listener", func(t *testing.T) (string, func(), func() bool) {
		h := StartHung(t)
		var before int
		return h.Addr(), func() { before = h.Accepted() }, func() bool { return h.Accepted() > before }
	}},
	{"silent", func(t *testing.T) (string, func(), func() bool) {
		r := testserver.RedisT(t, testserver.RedisOptions{})
		p := testserver.ProxyT(t, r.Addr())
		return p.Addr(), func() { p.Blackhole(true) }, func() bool { return p.Pending() > 0 }
	}},
}

// RunCancelHung checks that a command of a client dial opens returns
// once its context is cancelled (one without a deadline, and one whose
// deadline is far off), with its server hung: a listener that never
// answers (the connection never comes up) and a redis-server behind a
// proxy that stops answering (on a connection made before). known maps
// the names of the cases ("listener/far-deadline") that the client is
// known to fail to the reason: they are skipped, with it.
func RunCancelHung(t *testing.T, dial Dialer, known map[string]string) {
	for _, srv := range hungServers {
		for _, kind := range cancelKinds {
			t.Run(srv.name+"/"+kind.name, func(t *testing.T) {
				if why, ok := known[srv.name+"/"+kind.name]; ok {
					t.Skip("known to fail: " + why)
				}
				addr, hang, started := srv.start(t)
				c, closer, err := dial(context.Background(), registry.RedisServer{Addr: addr, DialTimeout: 3 * CancelBound})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { closer.Close() })
				// A connection made while the server still answers (a
				// listener never does: this command times out, and the
				// next one dials again).
				wctx, wcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				c.SetNXPX(wctx, "warm", "v", time.Minute)
				wcancel()
				hang()
				ctx, cancel := kind.make()
				defer cancel()
				errc := make(chan error, 1)
				go func() { _, _, err := c.Get(ctx, "warm"); errc <- err }()
				waitStarted(t, started)
				checkCancelled(t, "GET", cancel, func() error { return <-errc })
			})
		}
	}
}

// RunSubscribeHung checks that Subscribe of a client dial opens returns
// with an error once its context ends (its deadline passes, or it is
// cancelled: without a deadline, and with one far off), with its server
// hung as for [RunCancelHung].
func RunSubscribeHung(t *testing.T, dial Dialer) {
	for _, srv := range hungServers {
		for _, kind := range append([]string{"deadline"}, kindNames()...) {
			t.Run(srv.name+"/"+kind, func(t *testing.T) {
				addr, hang, started := srv.start(t)
				c, closer, err := dial(context.Background(), registry.RedisServer{Addr: addr, DialTimeout: 3 * CancelBound})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { closer.Close() })
				sub, ok := c.(redisclient.Subscriber)
				if !ok {
					t.Fatalf("%v cannot subscribe", c)
				}
				wctx, wcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				c.SetNXPX(wctx, "warm", "v", time.Minute)
				wcancel()
				hang()
				var (
					ctx    context.Context
					cancel context.CancelFunc
					end    func() // ends ctx
				)
				if kind == "deadline" {
					ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
					end = func() { <-ctx.Done() }
				} else {
					ctx, cancel = cancelKind(kind)()
					end = cancel
				}
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					s, err := sub.Subscribe(ctx, "stalltest", func(string) {})
					if err == nil {
						s.Close()
						err = errors.New("subscribed")
					}
					errc <- err
				}()
				waitStarted(t, started)
				checkCancelled(t, "SUBSCRIBE", end, func() error { return <-errc })
			})
		}
	}
}

// kindNames returns the names of cancelKinds.
func kindNames() []string {
	var names []string
	for _, k := range cancelKinds {
		names = append(names, k.name)
	}
	return names
}

// cancelKind returns the maker of the cancelKinds named name.
func cancelKind(name string) func() (context.Context, context.CancelFunc) {
	for _, k := range cancelKinds {
		if k.name == name {
			return k.make
		}
	}
	panic("stalltest: no context kind " + name)
}

// waitStarted waits, for at most 5 s, until a request has reached the
// hung server.
func waitStarted(t *testing.T, started func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !started(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the server")
		}
	}
}

// checkCancelled calls end, which ends the context of a request, and
// checks that wait returns an error within CancelBound from then.
func checkCancelled(t *testing.T, what string, end func(), wait func() error) {
	t.Helper()
	end()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- wait() }()
	select {
	case err := <-errc:
		if err == nil {
			t.Errorf("%s on a hung server succeeded", what)
		}
		t.Logf("returned %v after its context ended: %v", time.Since(start), err)
	case <-time.After(CancelBound):
		t.Errorf("%s on a hung server had not returned %v after its context ended", what, CancelBound)
	}
}

// RunCancelBeforeDeadline checks that a command of a client dial opens
// returns once its context is cancelled long before its deadline, with a
// redis-server behind a proxy that stops answering on a connection made
// before: the kit's request for a caller whose context has no deadline
// is such a context (a deadline of lockswap.CleanupTimeout or
// RequestTimeout, ended DeadlineGrace after the caller's cancellation),
// and a client that put the deadline on its socket and looked no further
// kept Release waiting for it.
func RunCancelBeforeDeadline(t *testing.T, dial Dialer) {
	r := testserver.RedisT(t, testserver.RedisOptions{})
	p := testserver.ProxyT(t, r.Addr())
	c, closer, err := dial(context.Background(), registry.RedisServer{Addr: p.Addr(), DialTimeout: 3 * CancelBound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*CancelBound)
	_, err = c.SetNXPX(wctx, "warm", "v", time.Minute)
	wcancel()
	if err != nil {
		t.Fatalf("SET before the proxy went silent: %v", err)
	}
	p.Blackhole(true)
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, stop := context.WithTimeout(parent, 10*CancelBound)
	defer stop()
	errc := make(chan error, 1)
	go func() { _, _, err := c.Get(ctx, "warm"); errc <- err }()
	for deadline := time.Now().Add(5 * time.Second); p.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never reached the server")
		}
	}
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("GET on a hung server succeeded")
		}
		t.Logf("returned %v after its context was cancelled: %v", time.Since(start), err)
	case <-time.After(CancelBound):
		t.Errorf("GET on a hung server had not returned %v after its context was cancelled (its deadline %v away)", CancelBound, 10*CancelBound)
	}
}

// RunCancelTLSHung checks that a command of a client dial opens with TLS
// returns once its context is cancelled while the client's TLS handshake
// waits for a server that never answers (a listener that accepts and
// never reads: a plain-text Redis given a TLS URL waits as well, for the
// end of a line that never comes), whether the context has a deadline
// far away or none; and once the deadline of a context that cannot be
// cancelled (Done is nil, as the kit's request under such a caller) has
// passed.
func RunCancelTLSHung(t *testing.T, dial Dialer) {
	for _, kind := range []string{"cancel", "deadline", "uncancellable"} {
		t.Run(kind, func(t *testing.T) {
			h := StartHung(t)
			c, closer, err := dial(context.Background(), registry.RedisServer{Addr: h.Addr(), DialTimeout: 3 * CancelBound,
				TLS: &tls.Config{InsecureSkipVerify: true}}) // nothing to verify: no handshake ends
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closer.Close() })
			before := h.Accepted()
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx := parent
			switch kind {
			case "deadline":
				var stop context.CancelFunc
				ctx, stop = context.WithTimeout(parent, 30*CancelBound)
				defer stop()
			case "uncancellable":
				ctx = deadlineOnly{context.Background(), time.Now().Add(CancelBound)}
			}
			errc := make(chan error, 1)
			go func() { _, _, err := c.Get(ctx, "k"); errc <- err }()
			for deadline := time.Now().Add(5 * time.Second); h.Accepted() == before; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the client never connected")
				}
			}
			start, wait := time.Now(), CancelBound
			if d, ok := ctx.Deadline(); ok && kind == "uncancellable" {
				wait += time.Until(d) // no cancel: its deadline ends it
			} else {
				cancel()
			}
			select {
			case err := <-errc:
				if err == nil {
					t.Error("GET on a hung server succeeded")
				}
				t.Logf("returned %v after the cancel (or, uncancellable, the start of the wait): %v", time.Since(start), err)
			case <-time.After(wait):
				t.Errorf("GET on a hung TLS server had not returned %v after its context ended", CancelBound)
			}
		})
	}
}

// deadlineOnly is a context with a deadline and no Done channel: nothing
// but the clock ends it.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }
