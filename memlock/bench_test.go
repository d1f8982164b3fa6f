package memlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// BenchmarkCycle measures the kit's own cost per lock, with no network:
// TryAcquire and Release of a free key, and a TryAcquire of a held key
// (contention).
func BenchmarkCycle(b *testing.B) {
	ctx := context.Background()
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	b.Run("free", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := lk.TryAcquire(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("held", func(b *testing.B) {
		l, err := lk.TryAcquire(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Release(ctx)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
				b.Fatal(err)
			}
		}
	})
}
