package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/testserver"
)

// CancelMidRequest checks that an acquisition abandoned while its request
// is on the way leaves no lock behind. newLocker returns a Locker whose
// clients reach the servers at the addresses it is given; the check puts a
// proxy that delays every byte by 40 ms in front of each server in srvs,
// starts TryAcquire on a free key, cancels the context once the request is
// held in the proxies (sent, not yet executed), and then, once the proxies
// have delivered everything, expects the key to be free: either the
// request was not sent, or its reply was read and the lock it took given
// back. A client that returns at the cancellation and lets the request run
// on the server later leaves the key held until its TTL.
func CancelMidRequest(t *testing.T, srvs []string, newLocker func(t *testing.T, addrs []string) lockswap.Locker) {
	t.Helper()
	cancelMidRequest(t, srvs, newLocker, time.Minute, 3*time.Second)
}

// CancelMidRequestWithoutUndo is [CancelMidRequest] for a backend that
// cannot undo an acquisition whose reply it did not read (legacysetnx:
// an old-style timestamp carries no owner to compare). Its declared
// weakness is allowed: when the reply comes later than
// lockswap.DeadlineGrace after the cancellation (a loaded machine, or a
// client that lets a cancelled request run, as rueidis's pipelines do),
// the lock it took is left until it expires. The acquisition takes ttl,
// and the key must be free again by its expiry plus the backend's
// rounding (round, a second for timestamps in seconds) and a second of
// slack, counted from the cancellation.
func CancelMidRequestWithoutUndo(t *testing.T, srvs []string, ttl, round time.Duration, newLocker func(t *testing.T, addrs []string) lockswap.Locker) {
	t.Helper()
	cancelMidRequest(t, srvs, newLocker, ttl, max(3*time.Second, ttl+round+time.Second))
}

// cancelMidRequest is CancelMidRequest with the lock's TTL and how long
// after the cancellation the key must be free again.
func cancelMidRequest(t *testing.T, srvs []string, newLocker func(t *testing.T, addrs []string) lockswap.Locker, ttl, freeWithin time.Duration) {
	t.Helper()
	ctx, key := context.Background(), "cancel-mid-request"
	proxies := make([]*testserver.Proxy, len(srvs))
	addrs := make([]string, len(srvs))
	for i, a := range srvs {
		proxies[i] = testserver.ProxyT(t, a)
		addrs[i] = proxies[i].Addr()
	}
	lk, probe := newLocker(t, addrs), newLocker(t, srvs)
	// Connect first, so that the timed request is the lock's alone.
	warm, err := lk.TryAcquire(ctx, "warm-up", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	pending := func() (n int64) {
		for _, p := range proxies {
			n += p.Pending()
		}
		return n
	}
	inFlight := func() bool { return pending() > 0 }
	drained := func() bool { return pending() == 0 }
	for _, p := range proxies {
		p.SetDelay(40 * time.Millisecond)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		l, err := lk.TryAcquire(actx, key, lockswap.WithTTL(ttl))
		if err == nil {
			// Acquired before the cancellation took effect: fine, if it
			// is released.
			err = l.Release(ctx)
			if err == nil {
				err = errAcquired
			}
		}
		done <- err
	}()
	queuetest.WaitUntil(t, "the request is held in a proxy", inFlight)
	cancel()
	cancelled := time.Now()
	var got error
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("TryAcquire did not return within 10 s of its context being cancelled")
	}
	if got != errAcquired && !errors.Is(got, context.Canceled) {
		t.Errorf("TryAcquire cancelled mid-request: %v, want an error matching context.Canceled", got)
	}
	queuetest.WaitUntil(t, "the proxies delivered (or dropped with its connection) every request", drained)
	// What was delivered runs on the server at once. A lock it took and
	// nobody gave back would stay for its TTL (a minute, unless the
	// backend declares that it cannot give it back); allow 3 s for a
	// release still on its way.
	deadline := cancelled.Add(freeWithin)
	for {
		l, err := probe.TryAcquire(ctx, key, lockswap.WithTTL(time.Minute))
		if err == nil {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after a TryAcquire cancelled mid-request, the key is still held (%v): the abandoned request took the lock and nobody gave it back", freeWithin, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var errAcquired = errors.New("acquired before the cancellation")
