// Package fencetest holds test helpers for fenced Lockers that more than
// one backend's tests use.
package fencetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockswap/lockswap"
)

// TakeNames takes and releases a fenced lock on each of the names
// "entity-0" … "entity-<n-1>" once (TryAcquire with opts), from workers
// goroutines, and returns the highest fence given. Any error fails t (the
// caller checks t.Failed before going on).
func TakeNames(t testing.TB, ctx context.Context, lk lockswap.Locker, n, workers int, opts ...lockswap.Option) uint64 {
	t.Helper()
	var highest atomic.Uint64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				l, err := lk.TryAcquire(ctx, fmt.Sprintf("entity-%d", i), opts...)
				if err != nil {
					t.Error(err)
					return
				}
				f, ok := l.Fence()
				if !ok {
					t.Errorf("entity-%d: the lock has no fence", i)
				}
				for h := highest.Load(); f > h && !highest.CompareAndSwap(h, f); h = highest.Load() {
				}
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return highest.Load()
}
