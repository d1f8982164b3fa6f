package attempt_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/background"
)

// TestGraceEnds: the attempt's context ends after the grace, so that a
// reply that never comes does not hold up the caller for ever.
func TestGraceEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	actx, stop := attempt.Context(ctx, attempt.Timeout)
	defer stop()
	cancel()
	var err error
	select {
	case <-actx.Done():
		err = actx.Err()
	case <-time.After(10 * time.Second):
		err = errors.New("still running 10 s after the caller gave up")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the attempt's context to end (Canceled) after the grace", err)
	}
}

// TestRequestContextKeepsValues: the request context of a caller that
// cannot be cancelled keeps its values and is still bounded.
func TestRequestContextKeepsValues(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	actx, stop := attempt.Context(ctx, attempt.Timeout)
	defer stop()
	if actx.Value(ctxKey{}) != "v" {
		t.Error("the attempt's context lost the caller's values")
	}
	if _, ok := actx.Deadline(); !ok {
		t.Error("the attempt's context has no deadline: a server that never answers would hold it for ever")
	}
}

type ctxKey struct{}

// TestContextCarriesDeadline: the request context of a caller with a
// deadline has a deadline of its own, the caller's plus the grace, so that
// clients that obey only deadlines (go-redis) stop in time.
func TestContextCarriesDeadline(t *testing.T) {
	d := time.Now().Add(time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), d)
	defer cancel()
	rctx, stop := attempt.Context(ctx, time.Minute)
	defer stop()
	got, ok := rctx.Deadline()
	if !ok || !got.Equal(d.Add(attempt.Grace)) {
		t.Fatalf("request deadline = %v, %v; want the caller's %v plus the grace %v", got, ok, d, attempt.Grace)
	}
	// A context without deadline still gets one: max from now.
	rctx2, stop2 := attempt.Context(context.Background(), time.Minute)
	defer stop2()
	if got, ok := rctx2.Deadline(); !ok || time.Until(got) > time.Minute {
		t.Fatalf("request deadline without a caller deadline = %v, %v; want at most a minute from now", got, ok)
	}
	// An ended context gets the grace from now.
	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	rctx3, stop3 := attempt.Context(ended, time.Minute)
	defer stop3()
	if got, ok := rctx3.Deadline(); !ok || time.Until(got) > attempt.Grace {
		t.Fatalf("request deadline of an ended context = %v, %v; want at most the grace from now", got, ok)
	}
}

// TestReleaseGoesOnInBackground: a release whose outcome is unknown at the
// caller's deadline returns then, pending, and is retried in the
// background until it gets an answer.
func TestReleaseGoesOnInBackground(t *testing.T) {
	var g background.Group
	defer g.Close()
	answered := make(chan struct{})
	var calls atomic.Int32
	unknown := errors.New("i/o timeout")
	op := func(ctx context.Context) (int, error) {
		if calls.Add(1) < 5 {
			<-ctx.Done()
			return 0, unknown
		}
		return 1, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var got int
	start := time.Now()
	rctx, stop := attempt.Context(ctx, lockswap.CleanupTimeout)
	limit, _ := rctx.Deadline()
	v, err := op(rctx) // the caller's own first request
	stop()
	_, err, pending := attempt.Release(ctx, &g, start, limit, v, err, op, func(err error) bool { return errors.Is(err, unknown) }, func(v int, err error) {
		got = v
		close(answered)
	})
	if !errors.Is(err, unknown) || !pending {
		t.Fatalf("Release = %v, pending %v; want the unknown outcome, pending", err, pending)
	}
	if d := time.Since(start); d > 50*time.Millisecond+attempt.Grace+200*time.Millisecond {
		t.Errorf("Release returned %v after it began, past the caller's deadline (50ms) plus the grace", d.Round(time.Millisecond))
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the background release never got its answer")
	}
	if got != 1 {
		t.Fatalf("background answer = %d, want 1", got)
	}
}

// TestReleaseRetryNoticesCancel: a caller whose context has no deadline
// and is cancelled while a retry of its release hangs gets its answer
// within the grace (plus the late notice of a cancellation, and the lags
// of a loaded machine), not at the limit of the release
// (lockswap.CleanupTimeout): the retries run under a request context of
// the caller's, not one detached from its cancellation.
func TestReleaseRetryNoticesCancel(t *testing.T) {
	var g background.Group
	defer g.Close()
	unknown := errors.New("connection reset")
	retrying := make(chan struct{})
	var calls atomic.Int32
	op := func(ctx context.Context) (int, error) {
		if calls.Add(1) == 2 {
			close(retrying)
		}
		if calls.Load() > 1 {
			<-ctx.Done() // the server hangs
		}
		return 0, unknown
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	limit := attempt.Limit(ctx, lockswap.CleanupTimeout)
	_, err := op(ctx) // the caller's own first request fails at once
	type result struct {
		err     error
		pending bool
	}
	done := make(chan result, 1)
	go func() {
		_, err, pending := attempt.Release(ctx, &g, start, limit, 0, err, op, func(err error) bool { return errors.Is(err, unknown) }, nil)
		done <- result{err, pending}
	}()
	<-retrying
	cancelled := time.Now()
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, unknown) || !r.pending {
			t.Fatalf("Release = %v, pending %v; want the unknown outcome, pending", r.err, r.pending)
		}
		if d := time.Since(cancelled); d > lockswap.CleanupTimeout/2 {
			t.Errorf("Release returned %v after the caller's cancellation, want about the grace (%v)", d.Round(time.Millisecond), attempt.Grace)
		}
	case <-time.After(lockswap.CleanupTimeout / 2):
		t.Fatalf("Release had not returned %v after the caller's cancellation (grace %v): its retry ignored it", lockswap.CleanupTimeout/2, attempt.Grace)
	}
}

// TestGroupCloseEndsWork: Close cancels background work that does not end
// by itself, and returns once it has.
func TestGroupCloseEndsWork(t *testing.T) {
	var g background.Group
	ended := make(chan struct{})
	if !g.Go(context.Background(), func(ctx context.Context) { <-ctx.Done(); close(ended) }) {
		t.Fatal("Go refused work on an open group")
	}
	g.Close()
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the work it cancelled ended")
	}
	if g.Go(context.Background(), func(context.Context) {}) {
		t.Fatal("Go accepted work after Close")
	}
}
