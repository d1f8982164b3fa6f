package stalltest

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// RunDeadlineOnlyHung checks that a command of a client dial opens,
// under a context with a deadline and no Done channel (the kit's request
// under a caller's context.Background, as in Release(ctx.Background())),
// returns once that deadline has passed, with its redis-server behind a
// proxy that stops answering on a connection made before: a client that
// watches only a context's Done channel waited for its own timeouts
// (rueidis: 12 s, against a deadline of 1 s).
func RunDeadlineOnlyHung(t *testing.T, dial Dialer) {
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
	CheckGetByDeadline(t, c, "GET on a hung server", time.Second, nil)
}

// CheckGetByDeadline checks that c's GET under a context with a deadline
// of bound and no Done channel (the kit's request under a caller's
// context.Background) returns, with an error, at that deadline (not before
// the start of its attempt.Slot, and within CancelBound after it),
// whatever keeps it (what names it in the failures); it returns the GET's
// error. A bound of attempt.MinShared or more takes the path of the
// kit's requests begun with that much to go (the deadline's shared slot).
// A GET still running after CancelBound is waited for, for up to half a
// minute, after late is called (nil: nothing to do), which must end it.
func CheckGetByDeadline(t *testing.T, c redisclient.Client, what string, bound time.Duration, late func()) error {
	t.Helper()
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.Get(deadlineOnly{context.Background(), start.Add(bound)}, "warm")
		errc <- err
	}()
	select {
	case err := <-errc:
		took := time.Since(start)
		if err == nil {
			t.Errorf("%s succeeded", what)
		}
		if took < bound-attempt.Slot {
			t.Errorf("%s returned %v after it began, before its deadline of %v: %v", what, took, bound, err)
		}
		t.Logf("returned %v after it began, its deadline %v: %v", took, bound, err)
		return err
	case <-time.After(bound + CancelBound):
		t.Errorf("%s under a context with a deadline of %v and no Done channel had not returned after %v", what, bound, bound+CancelBound)
		if late != nil {
			late()
			select {
			case <-errc:
			case <-time.After(30 * time.Second):
				t.Errorf("%s had not returned 30 s after it was made to end", what)
			}
		}
		return nil
	}
}

// RunCancelWhileDialing checks that a command of a client dial opens
// returns once its context is cancelled while another command's
// connection is coming up to a server that accepts and never answers:
// rueidis has the commands bound for a connection that comes up wait for
// its handshake without looking at their own contexts.
func RunCancelWhileDialing(t *testing.T, dial Dialer) {
	h := StartHung(t)
	c, closer, err := dial(context.Background(), registry.RedisServer{Addr: h.Addr(), DialTimeout: 3 * CancelBound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	// The second command lands on the first's connection in some runs
	// only (a client may have several connections): four times.
	for range 4 {
		before := h.Accepted()
		first, stopFirst := context.WithTimeout(context.Background(), farDeadline)
		firstDone := make(chan struct{})
		go func() {
			defer close(firstDone)
			c.Get(first, "k") // dials: the handshake hangs
		}()
		// The first command dials, unless it joined a connection still
		// coming up from before: either way one is coming up.
		for deadline := time.Now().Add(time.Second); h.Accepted() == before && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), farDeadline)
		errc := make(chan error, 1)
		go func() { _, _, err := c.Get(ctx, "k"); errc <- err }()
		// Cancelled once it has had the time to reach the client's wait,
		// which nothing outside the client shows.
		tm := time.NewTimer(50 * time.Millisecond)
		<-tm.C
		checkCancelled(t, "GET beside a connection coming up", cancel, func() error { return <-errc })
		stopFirst()
		<-firstDone
	}
}
