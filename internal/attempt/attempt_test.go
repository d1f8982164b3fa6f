package attempt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/memlock"
)

// TestCancelledDuringAttempt: the attempt's context outlives the caller's
// cancellation, so that the attempt can finish; a lock it took then is
// given back and the caller gets the context's error.
func TestCancelledDuringAttempt(t *testing.T) {
	store := memlock.NewStore()
	lk, other := memlock.New(store), memlock.New(store)
	defer lk.Close()
	defer other.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stillAlive bool
	l, err := attempt.Run(ctx, func(actx context.Context) (lockswap.Lock, error) {
		cancel() // the caller gives up while the request is on its way
		select {
		case <-actx.Done():
		default:
			stillAlive = true
		}
		return lk.TryAcquire(actx, "k", lockswap.WithTTL(time.Minute))
	})
	if !stillAlive {
		t.Error("the attempt's context ended with the caller's: the request in flight would be abandoned")
	}
	if l != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = (%v, %v), want no lock and an error matching context.Canceled", l, err)
	}
	ol, err := other.TryAcquire(context.Background(), "k", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("the lock taken for a caller who gave up was not given back: %v", err)
	}
	ol.Release(context.Background())
}

// TestGraceEnds: the attempt's context ends after the grace, so that a
// reply that never comes does not hold up the caller for ever.
func TestGraceEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := attempt.Run(ctx, func(actx context.Context) (lockswap.Lock, error) {
		cancel()
		select {
		case <-actx.Done():
			return nil, actx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("still running 10 s after the caller gave up")
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the attempt's context to end (Canceled) after the grace", err)
	}
}

// TestUncancellableContext: a context that cannot end is passed as it is.
func TestUncancellableContext(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	_, _ = attempt.Run(ctx, func(actx context.Context) (lockswap.Lock, error) {
		if actx != ctx {
			t.Error("the attempt did not get the caller's own context")
		}
		return nil, errors.New("done")
	})
}

type ctxKey struct{}
