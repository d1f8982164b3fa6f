package rueidis_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
)

// TestCancelHung: a command returns soon after its context (without a
// deadline, or with one far off) is cancelled, with the server hung,
// before and after the connection is up.
func TestCancelHung(t *testing.T) {
	t.Parallel() // mostly waiting for a hung server, on servers of its own
	stalltest.RunCancelHung(t, rueidis.Dial, nil)
}

// TestSubscribeHung: Subscribe returns soon after its context ends (its
// deadline passes or it is cancelled), with the server hung, before and
// after the connection is up.
func TestSubscribeHung(t *testing.T) { t.Parallel(); stalltest.RunSubscribeHung(t, rueidis.Dial) }

// TestCancelBeforeDeadline: a command whose context is cancelled long
// before its deadline returns soon after the cancellation, with the
// server hung, on a client made without AlwaysPipelining (given to New),
// which runs a command alone on its connection with the deadline on the
// socket and did not watch the cancellation. (A client Dial made
// pipelines always: TestCancelHung.)
func TestCancelBeforeDeadline(t *testing.T) {
	stalltest.RunCancelBeforeDeadline(t, dialPlain)
}

// dialPlain makes a rueidis client with the options of client=rueidis
// URLs but AlwaysPipelining, and adapts it with NewNamed.
func dialPlain(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	c, err := rueidislib.NewClient(rueidislib.ClientOption{InitAddress: []string{s.Addr},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if err != nil {
		return nil, nil, err
	}
	return rueidis.NewNamed(c, s.Addr), closerFunc(c.Close), nil
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// TestCancelTLSHung: a command whose connection is still in its TLS
// handshake with a server that never answers returns soon after its
// context is cancelled.
func TestCancelTLSHung(t *testing.T) { t.Parallel(); stalltest.RunCancelTLSHung(t, rueidis.Dial) }

// TestPastDeadlineNotSent: a command whose context's deadline has passed
// although its timer has not run yet (a busy machine runs timers late)
// is not sent: the call returns context.DeadlineExceeded and the server
// runs nothing: alone on a client Dial made (which pipelines always, so
// rueidis would queue and write it), as the first command of its grouped
// form, in a batch, and on a client without AlwaysPipelining (which runs
// it on the socket, whose deadline has passed).
func TestPastDeadlineNotSent(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	check := redistest.Rueidis(t, srv.Addr())
	open := func(t *testing.T, dial func(context.Context, registry.RedisServer) (redisclient.Client, io.Closer, error)) redisclient.Client {
		t.Helper()
		c, closer, err := dial(context.Background(), registry.RedisServer{Addr: srv.Addr()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		return c
	}
	warm := func(t *testing.T, c redisclient.Client) redisclient.Client {
		t.Helper()
		// The connection up and rueidis's writer running.
		if _, _, err := c.Get(context.Background(), "warm"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    func(t *testing.T) redisclient.Client
	}{
		{"alone", func(t *testing.T) redisclient.Client { return warm(t, open(t, rueidis.Dial)) }},
		{"grouped/first", func(t *testing.T) redisclient.Client {
			return warm(t, open(t, rueidis.Dial).(redisclient.Grouper).Grouped())
		}},
		{"alone/without-AlwaysPipelining", func(t *testing.T) redisclient.Client { return warm(t, open(t, dialPlain)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c(t)
			key := "late:" + tc.name
			ok, err := c.SetNXPX(lateTimer(), key, "v", time.Minute)
			if ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("SET NX PX under a passed deadline = %v, %v; want context.DeadlineExceeded", ok, err)
			}
			if _, set, err := check.Get(context.Background(), key); err != nil || set {
				t.Errorf("GET %s = set %v, %v: the command was sent after its deadline", key, set, err)
			}
		})
	}
	t.Run("grouped/batch", func(t *testing.T) {
		c, p := groupedBehindProxy(t)
		p.SetDelay(100 * time.Millisecond)
		first := make(chan error, 1)
		go func() {
			_, err := c.SetNXPX(context.Background(), "first", "v", time.Minute)
			first <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); !rueidis.InFlight(c); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the first command never went")
			}
		}
		ok, err := c.SetNXPX(lateTimer(), "late:batch", "v", time.Minute)
		if ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("SET NX PX under a passed deadline = %v, %v; want context.DeadlineExceeded", ok, err)
		}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if _, set, err := c.Get(context.Background(), "late:batch"); err != nil || set {
			t.Errorf("GET late:batch = set %v, %v: the command was sent after its deadline", set, err)
		}
	})
}

// lateTimer returns a context whose deadline passed a millisecond ago and
// whose timer has not run: Err is nil and Done is open.
func lateTimer() context.Context {
	return lateTimerCtx{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond), done: make(chan struct{})}
}

type lateTimerCtx struct {
	context.Context
	deadline time.Time
	done     chan struct{}
}

func (c lateTimerCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c lateTimerCtx) Done() <-chan struct{}       { return c.done }

// TestDeadlineOnlyHung: a command under a context with a deadline and no
// Done channel (Release(context.Background()) makes one) returns at that
// deadline with the server hung, on a client Dial made and on NewClient's:
// rueidis watches only Done for a pipelined command.
func TestDeadlineOnlyHung(t *testing.T) {
	t.Parallel() // mostly waiting for a hung server, on servers of its own
	t.Run("Dial", func(t *testing.T) { stalltest.RunDeadlineOnlyHung(t, rueidis.Dial) })
	t.Run("NewClient", func(t *testing.T) { stalltest.RunDeadlineOnlyHung(t, dialNewClient) })
}

// TestCancelWhileDialing: a command returns soon after its context is
// cancelled while another command's connection comes up to a server that
// never answers (rueidis has the commands bound for it wait for its
// handshake), on a client Dial made and on NewClient's.
func TestCancelWhileDialing(t *testing.T) {
	t.Parallel() // mostly waiting for a hung server, on servers of its own
	t.Run("Dial", func(t *testing.T) { stalltest.RunCancelWhileDialing(t, rueidis.Dial) })
	t.Run("NewClient", func(t *testing.T) { stalltest.RunCancelWhileDialing(t, dialNewClient) })
}
