package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// asMutex is h with every Locker adding opt to the calls where its caller
// asks for a mutex: a permit of limit 1 and a write hold must keep
// everything a mutex keeps, so the mutex suite runs on them unchanged
// (MutexCasesAsOnePermit, MutexCasesAsWriteHolds).
func asMutex(h Harness, opt lockswap.Option) Harness {
	newLocker := h.NewLocker
	h.NewLocker = func(t *testing.T) lockswap.Locker {
		return withOption(newLocker(t), opt)
	}
	if newTTL := h.NewLockerTTL; newTTL != nil {
		h.NewLockerTTL = func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := newTTL(t, ttl)
			if lk == nil {
				return nil, err
			}
			return withOption(lk, opt), err
		}
	}
	if expire := h.Expire; expire != nil {
		h.Expire = func(t *testing.T, holder lockswap.Locker, l lockswap.Lock) {
			expire(t, base(holder), l)
		}
	}
	return h
}

// optionLocker is a Locker whose calls take opt before their own options.
type optionLocker struct {
	lockswap.Locker
	opt lockswap.Option
}

// OnePermit returns lk with every Acquire and TryAcquire taking a permit
// of a counting semaphore of limit 1 (lockswap.WithPermits(1)) unless the
// call gives WithPermits itself: a permit of limit 1 must keep what a
// mutex keeps, so a test written for the mutex (RunFaults, RunMatrix, a
// backend's own) runs on permits through it. RunSemaphore runs Run so.
func OnePermit(lk lockswap.Locker) lockswap.Locker { return withOption(lk, lockswap.WithPermits(1)) }

// WriteHolds returns lk with every Acquire and TryAcquire taking the write
// hold of the key's read-write lock (lockswap.WithWrite): a write hold
// must keep what a mutex keeps, so a test written for the mutex runs on
// write holds through it. RunReadWrite runs Run so. A call that gives
// WithRead or WithPermits itself is refused (ErrInvalid): one hold is of
// one kind.
func WriteHolds(lk lockswap.Locker) lockswap.Locker { return withOption(lk, lockswap.WithWrite()) }

func withOption(lk lockswap.Locker, opt lockswap.Option) lockswap.Locker {
	if lk == nil {
		return nil
	}
	return optionLocker{lk, opt}
}

// base is the Locker under lk's optionLocker, or lk: what the cases ask
// for optional methods (TTLRange, DefaultTTL).
func base(lk lockswap.Locker) lockswap.Locker {
	if p, ok := lk.(optionLocker); ok {
		return p.Locker
	}
	return lk
}

func (p optionLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return p.Locker.Acquire(ctx, key, p.with(opts)...)
}

func (p optionLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return p.Locker.TryAcquire(ctx, key, p.with(opts)...)
}

// with puts p.opt before opts, so that the same option among them wins.
func (p optionLocker) with(opts []lockswap.Option) []lockswap.Option {
	return append([]lockswap.Option{p.opt}, opts...)
}
