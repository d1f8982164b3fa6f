package acquire_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
)

func TestRetryLoop(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	v, err := acquire.Retry(ctx, lockswap.ConstantRetry(time.Millisecond), func(context.Context) (int, error) {
		if calls.Add(1) < 3 {
			return 0, fmt.Errorf("busy: %w", lockswap.ErrHeld)
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls.Load() != 3 {
		t.Fatalf("Retry = %v, %v after %d calls; want 42 after 3", v, err, calls.Load())
	}

	calls.Store(0)
	_, err = acquire.Retry(ctx, lockswap.ConstantRetry(time.Millisecond), func(context.Context) (int, error) {
		calls.Add(1)
		return 0, fmt.Errorf("bad: %w", lockswap.ErrInvalid)
	})
	if !errors.Is(err, lockswap.ErrInvalid) || calls.Load() != 1 {
		t.Fatalf("an ErrInvalid attempt must not be retried: err %v after %d calls", err, calls.Load())
	}

	_, err = acquire.Retry(ctx, lockswap.LimitedRetry(time.Millisecond, 2), func(context.Context) (int, error) {
		return 0, fmt.Errorf("down: %w", lockswap.ErrUnavailable)
	})
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, context.Canceled) {
		t.Fatalf("policy gave up: err = %v, want the last cause only", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // not passed before the first attempt on a loaded machine
	defer cancel()
	_, err = acquire.Retry(cctx, lockswap.ConstantRetry(time.Hour), func(context.Context) (int, error) {
		return 0, fmt.Errorf("busy: %w", lockswap.ErrHeld)
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a wait the context ended must match both ctx.Err() and the cause; got %v", err)
	}
}

// TestOutage: a wait under a context that never ends stops once every
// attempt has found the backend unavailable for the outage limit, counted
// from the start of the first of them, with an error that still matches
// ErrUnavailable; no attempt or retry delay runs past the limit;
// contention alone does not count, and an attempt that reaches the backend
// starts the count again.
func TestOutage(t *testing.T) {
	var attempts int
	down := fmt.Errorf("connection refused: %w", lockswap.ErrUnavailable)
	const limit = 50 * time.Millisecond
	var timeouts []time.Duration
	begin := time.Now()
	outage := acquire.NewOutage(limit, nil)
	_, err := acquire.Retry(context.Background(), outage.Strategy(lockswap.ConstantRetry(time.Hour)),
		outage.Wrap(time.Hour, func(_ context.Context, timeout time.Duration) (lockswap.Lock, error) {
			attempts++
			timeouts = append(timeouts, timeout)
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) || acquire.Retryable(err) {
		t.Fatalf("err = %v, want a final error matching ErrUnavailable", err)
	}
	// An hour's retry delay was cut to what was left of the bound, and the
	// attempt after it ended the wait without running.
	if d := time.Since(begin); d < limit || d > time.Minute {
		t.Fatalf("gave up after %v, want the %v limit (not the hour-long retry delay)", d, limit)
	}
	if attempts != 1 || timeouts[0] > limit {
		t.Fatalf("%d attempts with timeouts %v, want one bounded by the %v limit", attempts, timeouts, limit)
	}

	// An attempt that hangs until its timeout uses the bound up itself.
	outage = acquire.NewOutage(limit, nil)
	_, err = acquire.Retry(context.Background(), outage.Strategy(lockswap.ConstantRetry(time.Millisecond)),
		outage.Wrap(time.Hour, func(ctx context.Context, timeout time.Duration) (lockswap.Lock, error) {
			if timeout > limit {
				t.Errorf("an attempt got %v, more than the %v limit", timeout, limit)
			}
			time.Sleep(timeout) // a server that never answers, until the request's timeout
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) || acquire.Retryable(err) {
		t.Fatalf("err = %v, want a final error matching ErrUnavailable", err)
	}

	// Held, then down: the outage counts from the last answer.
	attempts = 0
	var lastAnswer time.Time
	outage = acquire.NewOutage(30*time.Millisecond, nil)
	_, err = acquire.Retry(context.Background(), outage.Strategy(lockswap.ConstantRetry(time.Millisecond)),
		outage.Wrap(time.Hour, func(context.Context, time.Duration) (lockswap.Lock, error) {
			attempts++
			if attempts <= 40 {
				lastAnswer = time.Now()
				return nil, lockswap.ErrHeld
			}
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(lastAnswer); d < 30*time.Millisecond || attempts < 42 {
		t.Fatalf("gave up %v after the last answer (%d attempts), want at least the 30ms limit counted from it", d, attempts)
	}

	// An Acquire whose bound passed while it waited behind others of its
	// Locker (nobody got an answer meanwhile) makes one attempt, bounded
	// by the grace, and gives up: no bound of its own on top.
	var shared acquire.LastAnswer
	outage = acquire.NewOutage(limit, &shared)
	for begin := time.Now(); time.Since(begin) < limit; {
		time.Sleep(limit / 5) // the wait in the line is the condition under test
	}
	attempts, timeouts = 0, nil
	_, err = acquire.Retry(context.Background(), outage.Strategy(lockswap.ConstantRetry(time.Millisecond)),
		outage.Wrap(time.Hour, func(_ context.Context, timeout time.Duration) (lockswap.Lock, error) {
			attempts++
			timeouts = append(timeouts, timeout)
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) || acquire.Retryable(err) {
		t.Fatalf("err = %v, want a final error matching ErrUnavailable", err)
	}
	if attempts != 1 || timeouts[0] > lockswap.DeadlineGrace {
		t.Fatalf("%d attempts with timeouts %v, want one bounded by the grace", attempts, timeouts)
	}
	// An answer to another Acquire of the Locker starts the count again.
	outage = acquire.NewOutage(limit, &shared)
	for begin := time.Now(); time.Since(begin) < limit; {
		time.Sleep(limit / 5)
	}
	shared.Answered()
	attempts, timeouts = 0, nil
	_, err = acquire.Retry(context.Background(), outage.Strategy(lockswap.ConstantRetry(time.Millisecond)),
		outage.Wrap(time.Hour, func(_ context.Context, timeout time.Duration) (lockswap.Lock, error) {
			attempts++
			timeouts = append(timeouts, timeout)
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) || timeouts[0] < limit/2 || attempts < 2 {
		t.Fatalf("after a fresh answer: %v, %d attempts with timeouts %v, want the whole bound again", err, attempts, timeouts)
	}

	// Negative: no limit (the strategy ends the wait here).
	outage = acquire.NewOutage(-1, nil)
	_, err = acquire.Retry(context.Background(), outage.Strategy(lockswap.LimitedRetry(time.Millisecond, 3)),
		outage.Wrap(time.Hour, func(context.Context, time.Duration) (lockswap.Lock, error) { return nil, down }))
	if !acquire.Retryable(err) {
		t.Fatalf("err = %v: with no outage limit the error should stay retryable", err)
	}
}

// TestOutageStrategyBoundsWithoutAllocating: the strategy Strategy returns
// cuts the wrapped strategy's delay to what is left of the bound once an
// outage is under way, keeps it before, and is the Outage itself: making
// it allocates nothing (the fewest of a few runs, since AllocsPerRun counts
// the whole process's allocations and other goroutines only add).
func TestOutageStrategyBoundsWithoutAllocating(t *testing.T) {
	outage := acquire.NewOutage(50*time.Millisecond, nil)
	s := outage.Strategy(lockswap.ConstantRetry(time.Hour))
	if d, ok := s.NextDelay(1); !ok || d != time.Hour {
		t.Fatalf("NextDelay before any failure = %v, %v; want the wrapped strategy's hour", d, ok)
	}
	down := fmt.Errorf("down: %w", lockswap.ErrUnavailable)
	_, _ = outage.Wrap(time.Hour, func(context.Context, time.Duration) (lockswap.Lock, error) { return nil, down })(context.Background())
	if d, ok := s.NextDelay(1); !ok || d > 50*time.Millisecond {
		t.Fatalf("NextDelay during an outage = %v, %v; want at most the 50ms bound", d, ok)
	}
	inner := lockswap.ConstantRetry(time.Millisecond)
	fewest := 1.0
	for range 5 {
		fewest = min(fewest, testing.AllocsPerRun(100, func() { s = outage.Strategy(inner) }))
	}
	if fewest != 0 {
		t.Fatalf("Strategy allocates %v times per call, want none", fewest)
	}
}
