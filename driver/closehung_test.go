package driver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// TestCloseEndsHungAttempt: an Acquire whose attempt is in flight on a
// server that never answers (the fake's request returns only when its
// context ends, as a client that watches cancellation does) ends with
// ErrClosed when the Locker is closed, not at the request's deadline
// (lockswap.RequestTimeout), whatever the caller's context (one that can
// never be cancelled too), with and without the local queue; TryAcquire
// too.
func TestCloseEndsHungAttempt(t *testing.T) {
	for _, call := range []string{"Acquire", "TryAcquire"} {
		for _, queue := range []bool{false, true} {
			for _, kind := range []string{"background", "deadline"} {
				t.Run(fmt.Sprintf("%s/queue=%v/%s", call, queue, kind), func(t *testing.T) {
					t.Parallel()
					entered := make(chan struct{}, 1)
					f := &fake{acquire: func(ctx context.Context, _ *driver.Claim[int]) (driver.Grant, error) {
						entered <- struct{}{}
						<-ctx.Done()
						return driver.Grant{}, fmt.Errorf("no answer: %w (%w)", ctx.Err(), lockswap.ErrUnavailable)
					}}
					lk, err := driver.New[int](f, driver.Config{Name: "fake", Queue: queue, Retry: lockswap.ConstantRetry(time.Millisecond)})
					if err != nil {
						t.Fatal(err)
					}
					ctx := context.Background()
					if kind == "deadline" {
						c, cancel := context.WithTimeout(ctx, time.Minute)
						defer cancel()
						ctx = c
					}
					errc := make(chan error, 1)
					go func() {
						var err error
						if call == "Acquire" {
							_, err = lk.Acquire(ctx, "k")
						} else {
							_, err = lk.TryAcquire(ctx, "k")
						}
						errc <- err
					}()
					<-entered
					lk.Close()
					// Well before the request's own deadline (5 s): Close
					// ended it.
					select {
					case err := <-errc:
						if !errors.Is(err, lockswap.ErrClosed) || len(sentinels(err)) != 1 {
							t.Errorf("%s at Close: err = %v (matches %v), want ErrClosed alone", call, err, sentinels(err))
						}
					case <-time.After(lockswap.RequestTimeout / 2):
						t.Fatalf("%s still waiting %v after Close on a hung request", call, lockswap.RequestTimeout/2)
					}
				})
			}
		}
	}
}
