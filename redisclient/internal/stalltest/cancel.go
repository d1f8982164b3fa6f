package stalltest

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/registry"
)

// CancelBound is how long a command may go on once its context, which has
// no deadline, is cancelled: generous (-race under load), and far below
// the client libraries' own timeouts (3 to 10 s) that a command ignoring
// the cancellation waits for.
const CancelBound = time.Second

// RunCancelHung checks that a command of a client dial opens returns
// once its context, which has no deadline, is cancelled, with its server
// hung: a listener that never answers (the connection never comes up)
// and a redis-server behind a proxy that stops answering (on a
// connection made before).
func RunCancelHung(t *testing.T, dial Dialer) {
	for _, srv := range []struct {
		name string
		// start returns the server's address, hang, which makes it hang,
		// and started, which reports that a command has reached it.
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
	} {
		t.Run(srv.name, func(t *testing.T) {
			addr, hang, started := srv.start(t)
			c, closer, err := dial(context.Background(), registry.RedisServer{Addr: addr, DialTimeout: 3 * CancelBound})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closer.Close() })
			// A connection made while the server still answers (a
			// listener never does: this command times out, and the next
			// one dials again).
			wctx, wcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			c.SetNXPX(wctx, "warm", "v", time.Minute)
			wcancel()
			hang()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { _, _, err := c.Get(ctx, "warm"); errc <- err }()
			for deadline := time.Now().Add(5 * time.Second); !started(); time.Sleep(time.Millisecond) {
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
				t.Errorf("GET on a hung server had not returned %v after its context (no deadline) was cancelled", CancelBound)
			}
		})
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
