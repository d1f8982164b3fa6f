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

	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = acquire.Retry(cctx, lockswap.ConstantRetry(time.Hour), func(context.Context) (int, error) {
		return 0, fmt.Errorf("busy: %w", lockswap.ErrHeld)
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a wait the context ended must match both ctx.Err() and the cause; got %v", err)
	}
}

// TestLimitOutage: a wait under a context that never ends stops once every
// attempt has found the backend unavailable for the outage limit, with an
// error that still matches ErrUnavailable; contention alone does not count,
// and an attempt that reaches the backend starts the count again.
func TestLimitOutage(t *testing.T) {
	var attempts int
	down := fmt.Errorf("connection refused: %w", lockswap.ErrUnavailable)
	begin := time.Now()
	_, err := acquire.Retry(context.Background(), lockswap.ConstantRetry(time.Millisecond),
		acquire.LimitOutage(50*time.Millisecond, func(context.Context) (lockswap.Lock, error) {
			attempts++
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) || acquire.Retryable(err) {
		t.Fatalf("err = %v, want a final error matching ErrUnavailable", err)
	}
	if d := time.Since(begin); d < 50*time.Millisecond || attempts < 2 {
		t.Fatalf("gave up after %v and %d attempts, want at least the 50ms limit", d, attempts)
	}

	// Held, then down: the outage counts from its own first attempt.
	attempts = 0
	var downSince time.Time
	_, err = acquire.Retry(context.Background(), lockswap.ConstantRetry(time.Millisecond),
		acquire.LimitOutage(30*time.Millisecond, func(context.Context) (lockswap.Lock, error) {
			attempts++
			if attempts <= 40 {
				return nil, lockswap.ErrHeld
			}
			if downSince.IsZero() {
				downSince = time.Now()
			}
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if d := time.Since(downSince); d < 30*time.Millisecond {
		t.Fatalf("gave up %v into the outage, want at least the 30ms limit counted from its start", d)
	}

	// Negative: no limit (the strategy ends the wait here).
	_, err = acquire.Retry(context.Background(), lockswap.LimitedRetry(time.Millisecond, 3),
		acquire.LimitOutage(-1, func(context.Context) (lockswap.Lock, error) { return nil, down }))
	if !acquire.Retryable(err) {
		t.Fatalf("err = %v: with no outage limit the error should stay retryable", err)
	}
}
