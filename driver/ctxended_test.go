package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// sentinels returns the lockswap sentinels err matches.
func sentinels(err error) []error {
	var out []error
	for _, s := range []error{lockswap.ErrHeld, lockswap.ErrUnavailable, lockswap.ErrLost, lockswap.ErrInvalid, lockswap.ErrClosed} {
		if errors.Is(err, s) {
			out = append(out, s)
		}
	}
	return out
}

// waitingFake is a fake that waits for a change (driver.Waiter).
type waitingFake struct{ *fake }

func (w waitingFake) Wait(ctx context.Context, c *driver.Claim[int], _ *driver.Outage) (driver.Grant, error) {
	return w.Acquire(ctx, c)
}

// TestContextEndedBeforeAttempt: an Acquire whose context has already
// ended (cancelled, or a deadline that passed before the first attempt
// could start) asks the backend nothing and fails with an error that
// names the backend and the key and matches the context's error and
// exactly one sentinel, lockswap.ErrUnavailable: nothing is known about
// the key. Through the wait loop without a queue, the local queue, and a
// Waiter, with and without retries.
func TestContextEndedBeforeAttempt(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"deadline passed", expired, context.DeadlineExceeded}} {
		for _, kind := range []string{"no queue", "queue", "waiter"} {
			for _, retry := range []lockswap.RetryStrategy{lockswap.NoRetry(), lockswap.ConstantRetry(time.Millisecond)} {
				f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
					t.Errorf("%s, %s: the driver was asked", c.name, kind)
					return driver.Grant{}, nil
				}}
				cfg := driver.Config{Name: "fake", Queue: kind == "queue"}
				var lk lockswap.Locker
				if kind == "waiter" {
					l, err := driver.New[int](waitingFake{f}, cfg)
					if err != nil {
						t.Fatal(err)
					}
					lk = l
				} else {
					lk = newLocker(t, f, cfg)
				}
				_, err := lk.Acquire(c.ctx, "k", lockswap.WithRetry(retry))
				if !errors.Is(err, c.want) {
					t.Errorf("%s, %s: err = %v, want it to match %v", c.name, kind, err, c.want)
				}
				if s := sentinels(err); len(s) != 1 || s[0] != lockswap.ErrUnavailable {
					t.Errorf("%s, %s: err = %v matches the sentinels %v, want exactly ErrUnavailable", c.name, kind, err, s)
				}
				if err != nil && !strings.HasPrefix(err.Error(), `fake: acquire "k": `) {
					t.Errorf("%s, %s: err = %q, want it to name the backend and the key", c.name, kind, err)
				}
				lk.Close()
			}
		}
	}
}

// TestAcquiredAfterTheCallerGaveUp: an attempt that took the lock after
// its caller gave up gives it back and fails with an error matching the
// context's error and exactly one sentinel (ErrUnavailable, a failed
// attempt), through TryAcquire and Acquire.
func TestAcquiredAfterTheCallerGaveUp(t *testing.T) {
	for _, kind := range []string{"TryAcquire", "Acquire", "Acquire queued"} {
		ctx, cancel := context.WithCancel(context.Background())
		f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
			cancel() // the caller gives up while the request is on its way
			return driver.Grant{}, nil
		}}
		lk := newLocker(t, f, driver.Config{Queue: kind == "Acquire queued"})
		try := lk.Acquire
		if kind == "TryAcquire" {
			try = lk.TryAcquire
		}
		_, err := try(ctx, "k", lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want it to match context.Canceled", kind, err)
		}
		if s := sentinels(err); len(s) != 1 || s[0] != lockswap.ErrUnavailable {
			t.Errorf("%s: err = %v matches the sentinels %v, want exactly ErrUnavailable", kind, err, s)
		}
		waitFor(t, "the lock taken for a caller who gave up was not given back", func() bool { return f.released.Load() == 1 })
	}
}
