package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestHostileOutageDefault: with context.Background() and default options,
// Acquire against a blackholed etcd ends with ErrUnavailable after the
// documented 15 s (lockswap.DefaultMaxOutage).
func TestHostileOutageDefault(t *testing.T) {
	t.Parallel()
	_, proxy, lk := proxied(t, "outage/")
	proxy.Blackhole(true)
	start := time.Now()
	_, err := lk.Acquire(context.Background(), "k")
	took := time.Since(start)
	t.Logf("Acquire against a blackholed etcd: %v after %v", err, took)
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("Acquire: %v, want ErrUnavailable", err)
	}
	if took < lockswap.DefaultMaxOutage-time.Second || took > lockswap.DefaultMaxOutage+promise {
		t.Fatalf("Acquire gave up after %v, want %v (+%v)", took, lockswap.DefaultMaxOutage, promise)
	}
}

// TestHostileOutageNoServer: nothing listening, a 1 s dial timeout (as
// dial_timeout=1s in a URL), default options otherwise: ErrUnavailable after
// lockswap.DefaultMaxOutage, not a hang.
func TestHostileOutageNoServer(t *testing.T) {
	t.Parallel()
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := Open(Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	start := time.Now()
	_, err = lk.Acquire(context.Background(), "k")
	took := time.Since(start)
	t.Logf("Acquire with no server: %v after %v", err, took)
	if !errors.Is(err, lockswap.ErrUnavailable) || took > lockswap.DefaultMaxOutage+promise {
		t.Fatalf("Acquire with no server: %v after %v, want ErrUnavailable within %v", err, took, lockswap.DefaultMaxOutage)
	}
}

// TestHostileOutageWhileWaiting: a waiter whose etcd goes silent mid-wait
// gives up with ErrUnavailable once its lockswap.WithMaxOutage (2 s) has
// passed, while a waiter for a lock merely held keeps waiting until its
// context ends, and so does a waiter cut off with no outage bound
// (WithMaxOutage(-1)).
func TestHostileOutageWhileWaiting(t *testing.T) {
	srv, proxy, lk := proxied(t, "outagewait/")
	const bound = 2 * time.Second
	ctx := ctxT(t, 30*time.Second)
	holder := openT(t, srv.Endpoints(), "outagewait/")
	hl, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Release(ctx)
	// Contention alone: waits past the outage bound, until ctx ends.
	err, over := timed(bound+time.Second, func(ctx context.Context) error {
		_, err := lk.Acquire(ctx, "k", lockswap.WithTTL(30*time.Second), lockswap.WithMaxOutage(bound))
		return err
	})
	if !errors.Is(err, lockswap.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) || over > promise {
		t.Fatalf("waiter on a held lock: %v (%v past the deadline), want ErrHeld and DeadlineExceeded", err, over)
	}
	if n := strings.Count(err.Error(), "gave up waiting"); n != 1 {
		t.Errorf("error says %q %d times: %v", "gave up waiting", n, err)
	}
	bounded := make(chan error, 1)
	go func() {
		_, err := lk.Acquire(context.Background(), "k", lockswap.WithTTL(30*time.Second), lockswap.WithMaxOutage(bound))
		bounded <- err
	}()
	uctx, ucancel := context.WithCancel(context.Background())
	defer ucancel()
	unbounded := make(chan error, 1)
	go func() {
		_, err := lk.Acquire(uctx, "k", lockswap.WithTTL(30*time.Second), lockswap.WithMaxOutage(-1))
		unbounded <- err
	}()
	waitQueueLen(t, holder, "k", 3)
	proxy.Blackhole(true)
	cut := time.Now()
	// The waiter without a bound is ended by its context, well after the
	// bounded one gave up.
	const unboundedFor = bound + 1500*time.Millisecond
	stop := time.AfterFunc(unboundedFor, ucancel)
	defer stop.Stop()
	select {
	case err := <-bounded:
		took := time.Since(cut)
		t.Logf("waiter cut off: %v after %v", err, took)
		if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
			t.Errorf("waiter cut off: %v, want ErrUnavailable", err)
		}
		if !strings.Contains(err.Error(), "WithMaxOutage") {
			t.Errorf("waiter cut off: %q does not name lockswap.WithMaxOutage", err)
		}
		if took > bound+time.Second {
			t.Errorf("waiter cut off gave up after %v, want about its %v outage bound", took, bound)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter cut off from etcd still waiting after 10s")
	}
	select {
	case err := <-unbounded:
		took := time.Since(cut)
		t.Logf("waiter cut off, no outage bound: %v after %v", err, took)
		if !errors.Is(err, context.Canceled) || took < unboundedFor {
			t.Errorf("waiter with no outage bound ended after %v (%v), want only when its context ended, after %v", took, err, unboundedFor)
		}
		if took > unboundedFor+promise {
			t.Errorf("waiter with no outage bound returned %v after its context ended, want ≤ %v", took-unboundedFor, promise)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter with no outage bound still waiting 10s after the cut, its context ended")
	}
}

// TestHostileOutagePerCall: the outage bound is the call's: against a
// blackholed etcd, concurrent Acquires on one Locker with
// lockswap.WithMaxOutage(1 s) and with no bound (-1) end after 1 s with
// ErrUnavailable and at their context's deadline, respectively.
func TestHostileOutagePerCall(t *testing.T) {
	t.Parallel()
	_, proxy, lk := proxied(t, "outagecall/")
	proxy.Blackhole(true)
	const bound = time.Second
	type result struct {
		err  error
		took time.Duration
		over time.Duration
	}
	boundedc, unboundedc := make(chan result, 1), make(chan result, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := lk.Acquire(ctx, "k", lockswap.WithMaxOutage(bound))
		boundedc <- result{err: err, took: time.Since(start)}
	}()
	go func() {
		err, over := timed(bound+1500*time.Millisecond, func(ctx context.Context) error {
			_, err := lk.Acquire(ctx, "k", lockswap.WithMaxOutage(-1))
			return err
		})
		unboundedc <- result{err: err, took: time.Since(start), over: over}
	}()
	b, u := <-boundedc, <-unboundedc
	t.Logf("bounded: %v after %v; unbounded: %v after %v (%v past its deadline)", b.err, b.took, u.err, u.took, u.over)
	if !errors.Is(b.err, lockswap.ErrUnavailable) || errors.Is(b.err, context.DeadlineExceeded) {
		t.Errorf("Acquire with WithMaxOutage(%v): %v, want ErrUnavailable before its context ended", bound, b.err)
	}
	if b.took < bound || b.took > bound+time.Second {
		t.Errorf("Acquire with WithMaxOutage(%v) gave up after %v", bound, b.took)
	}
	if !errors.Is(u.err, lockswap.ErrUnavailable) || !errors.Is(u.err, context.DeadlineExceeded) {
		t.Errorf("Acquire with WithMaxOutage(-1): %v, want ErrUnavailable and DeadlineExceeded", u.err)
	}
	if u.took < bound+1500*time.Millisecond || u.over > promise {
		t.Errorf("Acquire with WithMaxOutage(-1) returned after %v, %v past its deadline (net of scheduling delays), want at its deadline and within %v", u.took, u.over, promise)
	}
}

// TestHostileWaitErrorOnce: an Acquire ended by its context says "gave up
// waiting" once, whether it waited for a holder or for etcd.
func TestHostileWaitErrorOnce(t *testing.T) {
	srv, proxy, lk := proxied(t, "once/")
	ctx := ctxT(t, 30*time.Second)
	holder := openT(t, srv.Endpoints(), "once/")
	hl, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Release(ctx)
	for _, c := range []struct {
		name string
		key  string
		want error
	}{{"contention", "k", lockswap.ErrHeld}, {"outage", "free", lockswap.ErrUnavailable}} {
		if c.name == "outage" {
			proxy.Blackhole(true)
		}
		err, _ := timed(500*time.Millisecond, func(ctx context.Context) error {
			_, err := lk.Acquire(ctx, c.key)
			return err
		})
		if !errors.Is(err, c.want) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want %v and DeadlineExceeded", c.name, err, c.want)
		}
		if n := strings.Count(fmt.Sprint(err), "gave up waiting"); n != 1 {
			t.Errorf("%s: %q appears %d times in %q", c.name, "gave up waiting", n, err)
		}
	}
}
