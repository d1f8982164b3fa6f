package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// onePermit is h with every Locker taking permits of a semaphore of limit
// 1 where its caller asks for a mutex: a permit of limit 1 must keep
// everything a mutex keeps, so the mutex suite runs on it unchanged
// (MutexCasesAsOnePermit). A caller's own WithPermits still wins.
func onePermit(h Harness) Harness {
	newLocker := h.NewLocker
	h.NewLocker = func(t *testing.T) lockswap.Locker {
		return OnePermit(newLocker(t))
	}
	if newTTL := h.NewLockerTTL; newTTL != nil {
		h.NewLockerTTL = func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := newTTL(t, ttl)
			if lk == nil {
				return nil, err
			}
			return OnePermit(lk), err
		}
	}
	if expire := h.Expire; expire != nil {
		h.Expire = func(t *testing.T, holder lockswap.Locker, l lockswap.Lock) {
			expire(t, base(holder), l)
		}
	}
	return h
}

// permitLocker is a Locker whose calls take one permit of limit 1 unless
// told otherwise.
type permitLocker struct{ lockswap.Locker }

// OnePermit returns lk with every Acquire and TryAcquire taking a permit
// of a counting semaphore of limit 1 (lockswap.WithPermits(1)) unless the
// call gives WithPermits itself: a permit of limit 1 must keep what a
// mutex keeps, so a test written for the mutex (RunFaults, RunMatrix, a
// backend's own) runs on permits through it. RunSemaphore runs Run so.
func OnePermit(lk lockswap.Locker) lockswap.Locker {
	if lk == nil {
		return nil
	}
	return permitLocker{lk}
}

// base is the Locker under lk's permitLocker, or lk: what the cases ask
// for optional methods (TTLRange, DefaultTTL).
func base(lk lockswap.Locker) lockswap.Locker {
	if p, ok := lk.(permitLocker); ok {
		return p.Locker
	}
	return lk
}

func (p permitLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return p.Locker.Acquire(ctx, key, withOnePermit(opts)...)
}

func (p permitLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return p.Locker.TryAcquire(ctx, key, withOnePermit(opts)...)
}

// withOnePermit puts WithPermits(1) before opts, so that a WithPermits
// among them wins.
func withOnePermit(opts []lockswap.Option) []lockswap.Option {
	return append([]lockswap.Option{lockswap.WithPermits(1)}, opts...)
}
