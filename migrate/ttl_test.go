package migrate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	"github.com/lockswap/lockswap/migrate"
)

// TestOptionsTTL: Options.TTL is the TTL of both locks of a call without
// WithTTL, a call's WithTTL wins, and New refuses a TTL out of range.
func TestOptionsTTL(t *testing.T) {
	ctx := context.Background()
	legacy, target := memlock.NewStore(), memlock.NewStore()
	lk := mustNew(t, migrate.Options{Phase: migrate.PhaseDual, Legacy: memlock.New(legacy), Target: memlock.New(target), TTL: 3 * time.Second})
	if lk.DefaultTTL() != 3*time.Second {
		t.Errorf("DefaultTTL = %v, want Options.TTL 3s", lk.DefaultTTL())
	}
	for _, tc := range []struct {
		opts []lockswap.Option
		want time.Duration
	}{{nil, 3 * time.Second}, {[]lockswap.Option{lockswap.WithTTL(20 * time.Second)}, 20 * time.Second}} {
		for name, acquire := range map[string]func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error){
			"Acquire": lk.Acquire, "TryAcquire": lk.TryAcquire,
		} {
			l, err := acquire(ctx, "k", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Until(l.Deadline()); d > tc.want || d < tc.want-time.Second {
				t.Errorf("%s with %d options: deadline in %v, want about %v", name, len(tc.opts), d, tc.want)
			}
			l.Release(ctx)
		}
	}
	if _, err := migrate.New(migrate.Options{Phase: migrate.PhaseTarget, Target: memlock.New(target), TTL: time.Nanosecond}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Options.TTL 1ns: err = %v, want ErrInvalid", err)
	}
}
