// Package acquire holds the parts of an Acquire call that the kit
// (package driver), the local queue (internal/localq) and the Lockers that
// are not drivers (etcdlease, migrate) share: key and TTL validation, the
// retry loop, the outage bound and the error of a wait its context ended.
package acquire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
)

// ValidateContext refuses a nil ctx (a context.Context nobody made:
// calls need one to bound them) with an error matching lockswap.ErrInvalid
// that names the argument.
func ValidateContext(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("ctx is a nil context.Context (pass context.Background(), or better one with a deadline): %w", lockswap.ErrInvalid)
	}
	return nil
}

// ValidateKey checks that key is not empty; the error matches
// lockswap.ErrInvalid.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty lock key: %w", lockswap.ErrInvalid)
	}
	return nil
}

// ValidateTTL checks that ttl is within [lockswap.MinTTL,
// lockswap.MaxTTL]; the error matches lockswap.ErrInvalid.
func ValidateTTL(ttl time.Duration) error {
	_, err := lockswap.Options{}.Resolve(lockswap.WithTTL(ttl))
	return err
}

// Retry runs try until it succeeds, fails with an error that is neither
// lockswap.ErrHeld nor lockswap.ErrUnavailable, the strategy gives up, or ctx ends. It is
// the wait loop of the polling backends.
//
// When ctx ends the wait, the returned error matches both the last attempt's
// cause and ctx.Err().
func Retry[T any](ctx context.Context, strategy lockswap.RetryStrategy, try func(context.Context) (T, error)) (T, error) {
	var zero T
	if strategy == nil {
		strategy = lockswap.NoRetry()
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
			return zero, NotAttempted(err)
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

// NotAttempted returns the error of an Acquire whose context had ended
// before its first attempt: nothing was asked, so nothing is known about
// the key, and like an attempt its context cut short it matches
// lockswap.ErrUnavailable (a call with a live context may succeed) as
// well as ctxErr. It names neither backend nor key: [Retry] returns it as
// it is, and the caller prefixes it ([Name]).
func NotAttempted(ctxErr error) error { return &notAttempted{ctxErr: ctxErr} }

type notAttempted struct{ ctxErr error }

func (e *notAttempted) Error() string {
	return fmt.Sprintf("not attempted, the context had ended: %v (%v)", e.ctxErr, lockswap.ErrUnavailable)
}

func (e *notAttempted) Unwrap() []error { return []error{e.ctxErr, lockswap.ErrUnavailable} }

// Name returns err prefixed with prefix ("backend: acquire \"key\"") when
// err is, itself, a [NotAttempted] error, which names nothing; any other
// error as it is (the errors of attempts are named by whoever made them).
func Name(err error, prefix string) error {
	if _, ok := err.(*notAttempted); ok {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return err
}

// Retryable reports whether Acquire should try again after an attempt
// failed with err: contention (lockswap.ErrHeld) and outages (lockswap.ErrUnavailable),
// unless an [Outage] has declared the outage too long.
func Retryable(err error) bool {
	var oe *outageError
	if errors.As(err, &oe) {
		return false
	}
	return errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrUnavailable)
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
// and ctxErr with [errors.Is]. For backends that wait without [Retry] (etcdlease).
func WaitError(cause, ctxErr error) error { return &waitError{cause: cause, ctxErr: ctxErr} }
