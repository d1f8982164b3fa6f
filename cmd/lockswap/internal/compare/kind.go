package compare

import (
	"context"

	"github.com/lockswap/lockswap"
)

// The kinds of lock a comparison takes (Options.Kind).
const (
	KindMutex  = "mutex"  // the key's mutex
	KindPermit = "permit" // a permit of a counting semaphore of limit 1
	KindWrite  = "write"  // the write hold of a read-write lock
)

// Kinds lists the kinds Options.Kind accepts.
func Kinds() []string { return []string{KindMutex, KindPermit, KindWrite} }

// kindText describes kind for the report.
func kindText(kind string) string {
	switch kind {
	case KindPermit:
		return "permits of a counting semaphore of limit 1 (lockswap.WithPermits(1))"
	case KindWrite:
		return "write holds of a read-write lock (lockswap.WithWrite())"
	}
	return "mutexes"
}

// kindOption is the option every call takes for kind, or nil for the
// mutex.
func kindOption(kind string) *lockswap.Option {
	var o lockswap.Option
	switch kind {
	case KindPermit:
		o = lockswap.WithPermits(1)
	case KindWrite:
		o = lockswap.WithWrite()
	default:
		return nil
	}
	return &o
}

// lacksKind says why a backend with guarantees g cannot take kind, or "".
func lacksKind(kind string, g lockswap.Guarantees) string {
	switch {
	case kind == KindPermit && !g.Permits:
		return "the backend has no counting semaphores (its Guarantees say why)"
	case kind == KindWrite && !g.ReadWrite:
		return "the backend has no read-write locks (its Guarantees say why)"
	}
	return ""
}

// kindLocker is a Locker whose calls take opt before their own options.
type kindLocker struct {
	lockswap.Locker
	opt lockswap.Option
}

func (k kindLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return k.Locker.Acquire(ctx, key, append([]lockswap.Option{k.opt}, opts...)...)
}

func (k kindLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return k.Locker.TryAcquire(ctx, key, append([]lockswap.Option{k.opt}, opts...)...)
}
