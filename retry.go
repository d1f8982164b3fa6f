package lockswap

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryStrategy decides how long Acquire waits before its next attempt.
// Implementations are stateless and safe for concurrent use: the attempt
// number (1 after the first failed attempt) is passed in.
type RetryStrategy interface {
	// NextDelay returns the delay before attempt+1, or false to give up.
	NextDelay(attempt int) (time.Duration, bool)
}

type noRetry struct{}

func (noRetry) NextDelay(int) (time.Duration, bool) { return 0, false }

// NoRetry gives up after the first attempt.
func NoRetry() RetryStrategy { return noRetry{} }

type constantRetry struct {
	delay time.Duration
	max   int
}

func (c constantRetry) NextDelay(attempt int) (time.Duration, bool) {
	if c.max > 0 && attempt >= c.max {
		return 0, false
	}
	return c.delay, true
}

// ConstantRetry waits delay between attempts, until the context ends.
func ConstantRetry(delay time.Duration) RetryStrategy { return constantRetry{delay: delay} }

// LimitedRetry waits delay between attempts and gives up after attempts
// attempts in all.
func LimitedRetry(delay time.Duration, attempts int) RetryStrategy {
	if attempts < 1 {
		attempts = 1
	}
	return constantRetry{delay: delay, max: attempts}
}

type jitterRetry struct{ min, max time.Duration }

func (j jitterRetry) NextDelay(int) (time.Duration, bool) {
	if j.max <= j.min {
		return j.min, true
	}
	return j.min + rand.N(j.max-j.min), true
}

// JitterRetry waits a uniformly random delay in [min, max) between attempts,
// until the context ends. The randomness desynchronises competing clients
// (the Redlock retry rule).
func JitterRetry(min, max time.Duration) RetryStrategy { return jitterRetry{min: min, max: max} }

type backoff struct{ base, cap time.Duration }

func (b backoff) NextDelay(attempt int) (time.Duration, bool) {
	if attempt < 1 {
		attempt = 1
	}
	d := b.cap
	if attempt < 63 {
		if exp := b.base << (attempt - 1); exp > 0 && exp < b.cap {
			d = exp
		}
	}
	if d <= 0 {
		return 0, true
	}
	// Full jitter: uniform in [0, d], so competing clients spread out.
	return rand.N(d + 1), true
}

// ExponentialBackoff waits a random delay in [0, min(cap, base*2^(attempt-1))]
// between attempts ("full jitter"), until the context ends.
func ExponentialBackoff(base, cap time.Duration) RetryStrategy {
	if cap < base {
		cap = base
	}
	return backoff{base: base, cap: cap}
}

// Retry runs try until it succeeds, fails with an error that is neither
// [ErrHeld] nor [ErrUnavailable], the strategy gives up, or ctx ends. It is
// the wait loop of the polling backends, exported for custom ones.
//
// When ctx ends the wait, the returned error matches both the last attempt's
// cause and ctx.Err().
func Retry[T any](ctx context.Context, strategy RetryStrategy, try func(context.Context) (T, error)) (T, error) {
	var zero T
	if strategy == nil {
		strategy = NoRetry()
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var prev error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil && attempt == 1 {
			return zero, fmt.Errorf("acquire not attempted: %w", err)
		}
		v, err := try(ctx)
		if err == nil {
			return v, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The context ended during this attempt, which then failed
			// because of it: the cause of the wait is the attempt before.
			cause := err
			if prev != nil {
				cause = prev
			}
			return zero, &waitError{cause: cause, ctxErr: ctxErr}
		}
		if !Retryable(err) {
			return zero, err
		}
		prev = err
		delay, ok := strategy.NextDelay(attempt)
		if !ok {
			return zero, err
		}
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
		select {
		case <-ctx.Done():
			return zero, &waitError{cause: err, ctxErr: ctx.Err()}
		case <-timer.C:
		}
	}
}

// Retryable reports whether Acquire should try again after an attempt
// failed with err: contention ([ErrHeld]) and outages ([ErrUnavailable]),
// unless [LimitOutage] has declared the outage too long.
func Retryable(err error) bool {
	var oe *outageError
	if errors.As(err, &oe) {
		return false
	}
	return errors.Is(err, ErrHeld) || errors.Is(err, ErrUnavailable)
}

// LimitOutage wraps one Acquire's attempt function so that, once its
// attempts have found the backend unavailable for max without a break (no
// attempt reached it), the next unavailable attempt ends the wait: its
// error still matches [ErrUnavailable] but is not [Retryable]. max <= 0
// (no bound) returns try unchanged. For backend implementers: each Acquire wraps its
// own attempts (the wrapper keeps the start of the outage).
func LimitOutage(max time.Duration, try func(context.Context) (Lock, error)) func(context.Context) (Lock, error) {
	if max <= 0 {
		return try
	}
	var since time.Time
	return func(ctx context.Context) (Lock, error) {
		l, err := try(ctx)
		if err == nil || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrHeld) {
			since = time.Time{}
			return l, err
		}
		now := time.Now()
		if since.IsZero() {
			since = now
		} else if d := now.Sub(since); d >= max {
			return nil, &outageError{cause: err, d: d}
		}
		return nil, err
	}
}

// outageError ends a wait that found the backend unavailable for too long.
type outageError struct {
	cause error
	d     time.Duration
}

func (e *outageError) Error() string {
	return fmt.Sprintf("%v (unavailable for %v, giving up; see lockswap.WithMaxOutage)", e.cause, e.d.Round(time.Millisecond))
}

func (e *outageError) Unwrap() error { return e.cause }

// waitError is a wait that the context ended: it matches both the last
// attempt's cause and the context's error.
type waitError struct{ cause, ctxErr error }

func (e *waitError) Error() string {
	return fmt.Sprintf("gave up waiting (%v): %v", e.ctxErr, e.cause)
}

func (e *waitError) Unwrap() []error { return []error{e.ctxErr, e.cause} }

// WaitError returns an error for a wait that ctx ended, matching both cause
// and ctxErr with [errors.Is]. For backends that wait without [Retry].
func WaitError(cause, ctxErr error) error { return &waitError{cause: cause, ctxErr: ctxErr} }
