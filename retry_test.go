package lockswap_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

func TestRetryStrategies(t *testing.T) {
	if _, ok := lockswap.NoRetry().NextDelay(1); ok {
		t.Error("NoRetry must give up after the first attempt")
	}
	if d, ok := lockswap.ConstantRetry(7 * time.Millisecond).NextDelay(100); !ok || d != 7*time.Millisecond {
		t.Errorf("ConstantRetry(7ms).NextDelay(100) = %v, %v", d, ok)
	}
	lim := lockswap.LimitedRetry(time.Millisecond, 3)
	for a := 1; a <= 3; a++ {
		_, ok := lim.NextDelay(a)
		if want := a < 3; ok != want {
			t.Errorf("LimitedRetry(…, 3).NextDelay(%d) ok = %v, want %v", a, ok, want)
		}
	}
	j := lockswap.JitterRetry(10*time.Millisecond, 20*time.Millisecond)
	b := lockswap.ExponentialBackoff(time.Millisecond, 50*time.Millisecond)
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		d, _ := j.NextDelay(1)
		if d < 10*time.Millisecond || d >= 20*time.Millisecond {
			t.Fatalf("JitterRetry delay %v outside [10ms, 20ms)", d)
		}
		seen[d] = true
		for attempt, limit := range map[int]time.Duration{1: time.Millisecond, 3: 4 * time.Millisecond, 10: 50 * time.Millisecond, 100: 50 * time.Millisecond} {
			if d, ok := b.NextDelay(attempt); !ok || d < 0 || d > limit {
				t.Fatalf("ExponentialBackoff attempt %d: delay %v, want within [0, %v]", attempt, d, limit)
			}
		}
	}
	if len(seen) < 50 {
		t.Errorf("JitterRetry gave only %d distinct delays in 200 draws: no jitter", len(seen))
	}
}

func TestRetryLoop(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	v, err := lockswap.Retry(ctx, lockswap.ConstantRetry(time.Millisecond), func(context.Context) (int, error) {
		if calls.Add(1) < 3 {
			return 0, fmt.Errorf("busy: %w", lockswap.ErrHeld)
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls.Load() != 3 {
		t.Fatalf("Retry = %v, %v after %d calls; want 42 after 3", v, err, calls.Load())
	}

	calls.Store(0)
	_, err = lockswap.Retry(ctx, lockswap.ConstantRetry(time.Millisecond), func(context.Context) (int, error) {
		calls.Add(1)
		return 0, fmt.Errorf("bad: %w", lockswap.ErrInvalid)
	})
	if !errors.Is(err, lockswap.ErrInvalid) || calls.Load() != 1 {
		t.Fatalf("an ErrInvalid attempt must not be retried: err %v after %d calls", err, calls.Load())
	}

	_, err = lockswap.Retry(ctx, lockswap.LimitedRetry(time.Millisecond, 2), func(context.Context) (int, error) {
		return 0, fmt.Errorf("down: %w", lockswap.ErrUnavailable)
	})
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, context.Canceled) {
		t.Fatalf("policy gave up: err = %v, want the last cause only", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = lockswap.Retry(cctx, lockswap.ConstantRetry(time.Hour), func(context.Context) (int, error) {
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
	_, err := lockswap.Retry(context.Background(), lockswap.ConstantRetry(time.Millisecond),
		lockswap.LimitOutage(50*time.Millisecond, func(context.Context) (lockswap.Lock, error) {
			attempts++
			return nil, down
		}))
	if !errors.Is(err, lockswap.ErrUnavailable) || lockswap.Retryable(err) {
		t.Fatalf("err = %v, want a final error matching ErrUnavailable", err)
	}
	if d := time.Since(begin); d < 50*time.Millisecond || attempts < 2 {
		t.Fatalf("gave up after %v and %d attempts, want at least the 50ms limit", d, attempts)
	}

	// Held, then down: the outage counts from its own first attempt.
	attempts = 0
	var downSince time.Time
	_, err = lockswap.Retry(context.Background(), lockswap.ConstantRetry(time.Millisecond),
		lockswap.LimitOutage(30*time.Millisecond, func(context.Context) (lockswap.Lock, error) {
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
	_, err = lockswap.Retry(context.Background(), lockswap.LimitedRetry(time.Millisecond, 3),
		lockswap.LimitOutage(-1, func(context.Context) (lockswap.Lock, error) { return nil, down }))
	if !lockswap.Retryable(err) {
		t.Fatalf("err = %v: with no outage limit the error should stay retryable", err)
	}
}

// TestApplyOptionsMaxOutage: the default outage limit is DefaultMaxOutage,
// and WithMaxOutage changes it.
func TestApplyOptionsMaxOutage(t *testing.T) {
	o, err := lockswap.ApplyOptions(nil, nil)
	if err != nil || o.MaxOutage != lockswap.DefaultMaxOutage {
		t.Fatalf("default MaxOutage = %v (%v), want %v", o.MaxOutage, err, lockswap.DefaultMaxOutage)
	}
	o, _ = lockswap.ApplyOptions(nil, []lockswap.Option{lockswap.WithMaxOutage(-1)})
	if o.MaxOutage != -1 {
		t.Fatalf("WithMaxOutage(-1) gave %v", o.MaxOutage)
	}
	o, _ = lockswap.ApplyOptions(nil, []lockswap.Option{lockswap.WithMaxOutage(0)})
	if o.MaxOutage != lockswap.DefaultMaxOutage {
		t.Fatalf("WithMaxOutage(0) gave %v, want the default %v", o.MaxOutage, lockswap.DefaultMaxOutage)
	}
}
