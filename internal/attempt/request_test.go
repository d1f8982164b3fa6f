package attempt_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/attempt"
)

// waitDone waits for ctx's Done, at most 10 s, and returns when it closed.
func waitDone(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("request context still running 10 s on")
	}
	return time.Time{}
}

// TestRequestCancelEndsGraceLater: a cancellation of the caller's context
// ends the request context Grace later (not at once), with Canceled, and
// before its deadline.
func TestRequestCancelEndsGraceLater(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := attempt.New(ctx, time.Minute)
	defer r.Stop()
	done := r.Done() // a waiter, as a client that blocks on the request
	before := time.Now()
	cancel()
	end := waitDone(t, r)
	if gap := end.Sub(before); gap < attempt.Grace {
		t.Fatalf("the request ended %v after the cancellation, before the grace %v", gap, attempt.Grace)
	}
	if err := r.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v after the grace, want Canceled", err)
	}
	select {
	case <-done:
	default:
		t.Fatal("the channel Done returned first is still open")
	}
}

// TestRequestCancelSeenByErr: a client that only polls Err (never asks for
// Done) also sees the request end, Grace after it noticed the
// cancellation.
func TestRequestCancelSeenByErr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := attempt.New(ctx, time.Minute)
	defer r.Stop()
	before := time.Now()
	cancel()
	if err := r.Err(); err != nil && time.Since(before) < attempt.Grace {
		t.Fatalf("Err = %v at once after the cancellation; want the grace first", err)
	}
	end := waitDone(t, r)
	if gap := end.Sub(before); gap < attempt.Grace {
		t.Fatalf("the request ended %v after the cancellation, before the grace %v", gap, attempt.Grace)
	}
	if err := r.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v, want Canceled", err)
	}
}

// TestRequestDeadline: the request ends at its deadline (the caller's
// plus the grace, or max from now), not before, with DeadlineExceeded.
func TestRequestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent func() (context.Context, context.CancelFunc)
		max    time.Duration
	}{
		{"caller's deadline plus grace", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, time.Minute},
		{"max from now", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.parent()
			defer cancel()
			r := attempt.New(ctx, tc.max)
			defer r.Stop()
			d, ok := r.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			if pd, ok := ctx.Deadline(); ok && !d.Equal(pd.Add(attempt.Grace)) {
				t.Fatalf("deadline %v, want the caller's %v plus the grace", d, pd)
			}
			end := waitDone(t, r)
			if end.Before(d) {
				t.Fatalf("ended %v before its deadline", d.Sub(end))
			}
			if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Err = %v, want DeadlineExceeded", err)
			}
		})
	}
}

// TestRequestStop: Stop ends the request at once (Canceled, Done closed,
// also for a Done asked afterwards) and removes its registration with the
// caller's context, which a request waited on registers once it has run
// Watch; a later cancellation changes nothing.
func TestRequestStop(t *testing.T) {
	parent := &countingCtx{Context: context.Background(), done: make(chan struct{})}
	r := attempt.New(parent, time.Minute)
	done := r.Done()
	waitFor(t, "the registration with the caller's context", func() bool { return parent.live() == 1 })
	r.Stop()
	if n := parent.live(); n != 0 {
		t.Fatalf("%d registrations with the caller's context left after Stop", n)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done still open after Stop")
	}
	select {
	case <-r.Done():
	default:
		t.Fatal("Done asked after Stop is open")
	}
	if err := r.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v after Stop, want Canceled", err)
	}
	parent.cancel()
	if err := r.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v after Stop and a cancellation, want Canceled", err)
	}
}

// TestRequestShortCostsCallerNothing: a request waited on through Done
// that is stopped before Watch has passed never registers with the
// caller's context (registering locks the context that the caller's
// goroutines share). Runs whose stop came later than Watch/2 (a stalled
// machine) are tried again.
func TestRequestShortCostsCallerNothing(t *testing.T) {
	for try := 0; ; try++ {
		parent := &countingCtx{Context: context.Background(), done: make(chan struct{})}
		start := time.Now()
		r := attempt.New(parent, time.Minute)
		r.Done()
		r.Stop()
		if time.Since(start) >= attempt.Watch/2 {
			if try == 100 {
				t.Skip("no run stopped its request within Watch/2: the machine is too slow for this check")
			}
			continue
		}
		if n := parent.registered(); n != 0 {
			t.Fatalf("a request stopped %v after its start registered %d times with the caller's context", time.Since(start), n)
		}
		return
	}
}

// waitFor waits, at most 10 s, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("no %s within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRequestNotCancellable: a caller's context that nothing can cancel
// gives a request that nothing cancels (Done nil, Err nil), keeps its
// values and is bounded by its deadline.
func TestRequestNotCancellable(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	r := attempt.New(ctx, time.Minute)
	defer r.Stop()
	if r.Done() != nil || r.Err() != nil {
		t.Fatal("a request for an uncancellable caller can be cancelled")
	}
	if r.Value(ctxKey{}) != "v" {
		t.Fatal("values lost")
	}
	if d, ok := r.Deadline(); !ok || time.Until(d) > time.Minute {
		t.Fatalf("deadline %v, %v; want at most a minute from now", d, ok)
	}
}

// TestRequestConcurrent runs the context's methods, Stop and a
// cancellation at once (for the race detector); the request ends.
func TestRequestConcurrent(t *testing.T) {
	for range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		r := attempt.New(ctx, time.Minute)
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); <-r.Done() }()
		go func() { defer wg.Done(); _ = r.Err(); cancel() }()
		go func() { defer wg.Done(); _, _ = r.Deadline(); _ = r.Value(ctxKey{}); r.Stop() }()
		wg.Wait()
		if r.Err() == nil {
			t.Fatal("Err is nil after Stop")
		}
	}
}

// countingCtx is a cancellable context that implements AfterFunc, as
// context.AfterFunc uses it, and counts the registrations not yet
// stopped.
type countingCtx struct {
	context.Context
	mu    sync.Mutex
	done  chan struct{}
	err   error
	funcs map[int]func()
	next  int // registrations made
}

func (c *countingCtx) Done() <-chan struct{} { return c.done }

func (c *countingCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *countingCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.funcs == nil {
		c.funcs = map[int]func(){}
	}
	id := c.next
	c.next++
	c.funcs[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[id]
		delete(c.funcs, id)
		return ok
	}
}

func (c *countingCtx) live() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.funcs)
}

// registered is how many registrations were ever made.
func (c *countingCtx) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

func (c *countingCtx) cancel() {
	c.mu.Lock()
	c.err = context.Canceled
	close(c.done)
	fs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, f := range fs {
		go f()
	}
}

// TestRequestWakeupReuse: the timer and callback a stopped request gives
// back serve later requests only: cancelling the callers of stopped
// requests ends none of the live ones, and each live one still ends at its
// own cancellation.
func TestRequestWakeupReuse(t *testing.T) {
	var cancels []context.CancelFunc
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		r := attempt.New(ctx, time.Minute)
		r.Done()
		r.Stop()
	}
	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()
	rs := make([]*attempt.Request, 50)
	for i := range rs {
		rs[i] = attempt.New(live, time.Minute)
		defer rs[i].Stop()
		rs[i].Done()
	}
	for _, cancel := range cancels {
		cancel()
	}
	for i, r := range rs {
		if err := r.Err(); err != nil {
			t.Fatalf("request %d ended (%v) on another request's cancellation", i, err)
		}
	}
	cancelLive()
	for _, r := range rs {
		waitDone(t, r)
		if err := r.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
	}
}

// TestRequestOnce: Once begins the Request it is given the first time
// only; later calls get a new one, so that a stopped request never comes
// back to life. After Stop a request lets its caller's context go.
func TestRequestOnce(t *testing.T) {
	var keep attempt.Request
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r1 := attempt.Once(&keep, ctx, time.Minute)
	if r1 != &keep {
		t.Fatal("Once did not use the Request it was given")
	}
	if r1.Value(ctxKey{}) != "v" {
		t.Fatal("values lost")
	}
	r1.Stop()
	if r1.Value(ctxKey{}) != nil {
		t.Fatal("a stopped request still holds its caller's context")
	}
	r2 := attempt.Once(&keep, ctx, time.Minute)
	defer r2.Stop()
	if r2 == &keep {
		t.Fatal("Once began the same Request twice")
	}
	if r2.Err() != nil || r1.Err() == nil {
		t.Fatalf("Err = %v for the new request, %v for the stopped one; want nil and Canceled", r2.Err(), r1.Err())
	}
}

// TestRequestOnceAt: OnceAt takes the caller's reading of the clock as
// "now": the bound is max from that reading, and a Request already begun
// gives a new one with the same bound.
func TestRequestOnceAt(t *testing.T) {
	var keep attempt.Request
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now().Add(-time.Second)
	for _, want := range []*attempt.Request{&keep, nil} {
		r := attempt.OnceAt(&keep, ctx, now, 2*time.Second)
		if want != nil && r != want || want == nil && r == &keep {
			t.Fatalf("OnceAt returned %p for the Request at %p (begun: %v)", r, &keep, want == nil)
		}
		if d, _ := r.Deadline(); !d.Equal(now.Add(2 * time.Second)) {
			t.Fatalf("deadline %v after the reading, want 2s", d.Sub(now))
		}
		if r.Err() != nil {
			t.Fatalf("Err = %v before the deadline", r.Err())
		}
		r.Stop()
	}
}

// TestUntil: a request of Until keeps its parent's values, ends at its
// own deadline with DeadlineExceeded, takes an earlier deadline of its
// parent, and its Done is never nil (also under an uncancellable parent).
func TestUntil(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	r := attempt.Until(ctx, time.Now().Add(20*time.Millisecond))
	defer r.Stop()
	if r.Value(ctxKey{}) != "v" {
		t.Fatal("values lost")
	}
	if r.Done() == nil {
		t.Fatal("Done is nil under an uncancellable parent")
	}
	if err := r.Err(); err != nil {
		t.Fatalf("Err = %v before the deadline", err)
	}
	d, _ := r.Deadline()
	if end := waitDone(t, r); end.Before(d) {
		t.Fatalf("ended %v before its deadline", d.Sub(end))
	}
	if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", err)
	}

	pd, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r2 := attempt.Until(pd, time.Now().Add(time.Hour))
	defer r2.Stop()
	if d, _ := r2.Deadline(); d.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Deadline %v is past the parent's", d)
	}
}

// TestUntilParentEnds: a request of Until ends as soon as its parent
// does, with the parent's Err and without a grace: at once for a
// cancelled context (Err, polled before anyone asked for Done, sees it
// right away; a waiter on Done within Watch), and when a parent Request ends at the end of its own grace.
func TestUntilParentEnds(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r := attempt.Until(ctx, time.Now().Add(time.Hour))
		defer r.Stop()
		cancel()
		if err := r.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v right after the parent's cancellation, want Canceled", err)
		}
		select {
		case <-r.Done():
		default:
			t.Fatal("Done asked after Err saw the end is open")
		}
	})
	t.Run("waiter", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r := attempt.Until(ctx, time.Now().Add(time.Hour))
		defer r.Stop()
		done := r.Done()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Done still open 10 s after the parent's cancellation")
		}
		if err := r.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
	})
	t.Run("already ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := attempt.Until(ctx, time.Now().Add(time.Hour))
		defer r.Stop()
		select {
		case <-r.Done():
		default:
			t.Fatal("Done of a call whose parent had ended is open")
		}
		if err := r.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
	})
	t.Run("past deadline", func(t *testing.T) {
		r := attempt.Until(context.Background(), time.Now().Add(-time.Millisecond))
		defer r.Stop()
		select {
		case <-r.Done():
		default:
			t.Fatal("Done of a call past its deadline is open")
		}
		if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("parent request", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		parent := attempt.New(ctx, time.Minute)
		defer parent.Stop()
		r := attempt.Until(parent, time.Now().Add(time.Hour))
		defer r.Stop()
		done := r.Done()
		start := time.Now()
		cancel()
		if err := r.Err(); err != nil {
			t.Fatalf("Err = %v during the parent request's grace", err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Done still open 10 s after the parent request's cancellation")
		}
		if gap := time.Since(start); gap < attempt.Grace {
			t.Fatalf("ended %v after the cancellation, before the parent request's grace %v", gap, attempt.Grace)
		}
		if err := r.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", err)
		}
	})
}

// TestRequestEndAtClose: a request made to end at a Locker's Close ends at
// once when the closing context is cancelled (no grace), for a waiter on
// Done and for a client that only polls Err, whether the caller's context
// can never be cancelled (the request then shares its slot's channel in
// the Locker's Deadlines) or can; Stop afterwards is safe.
func TestRequestEndAtClose(t *testing.T) {
	for _, cancellable := range []bool{false, true} {
		for _, poll := range []bool{false, true} {
			closing, closeNow := context.WithCancel(context.Background())
			parent, cancelParent := context.Background(), context.CancelFunc(func() {})
			if cancellable {
				parent, cancelParent = context.WithCancel(parent)
			}
			dl := attempt.NewDeadlines(closing)
			r := attempt.New(parent, time.Minute).EndAtClose(dl)
			var done <-chan struct{}
			if !poll {
				if done = r.Done(); done == nil {
					t.Fatal("Done is nil for a request that Close can end")
				}
			}
			closeNow()
			if poll {
				if err := r.Err(); !errors.Is(err, context.Canceled) {
					t.Fatalf("cancellable=%v: Err = %v right after Close, want Canceled (no grace)", cancellable, err)
				}
			} else {
				select {
				case <-done:
				case <-time.After(attempt.Grace * 20):
					t.Fatalf("cancellable=%v: the request still running %v after Close", cancellable, attempt.Grace*20)
				}
			}
			r.Stop()
			cancelParent()
			dl.Close()
		}
	}
}
