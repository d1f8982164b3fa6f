package legacysetnx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/legacysetnx"
)

// TestOptionsTTL: Options.TTL is the TTL of a call without WithTTL, a
// call's WithTTL wins, and New refuses a TTL out of range.
func TestOptionsTTL(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rc := redistest.GoRedis(t, mr.Addr())
	lk, err := legacysetnx.New(rc, legacysetnx.Options{TTL: 3 * time.Second, Unit: legacysetnx.Milliseconds})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if lk.DefaultTTL() != 3*time.Second {
		t.Errorf("DefaultTTL = %v, want Options.TTL 3s", lk.DefaultTTL())
	}
	for _, tc := range []struct {
		opts []lockswap.Option
		want time.Duration
	}{{nil, 3 * time.Second}, {[]lockswap.Option{lockswap.WithTTL(20 * time.Second)}, 20 * time.Second}} {
		l, err := lk.TryAcquire(ctx, "k", tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Until(l.Deadline()); d > tc.want || d < tc.want-time.Second {
			t.Errorf("%d options: deadline in %v, want about %v", len(tc.opts), d, tc.want)
		}
		l.Release(ctx)
	}
	if _, err := legacysetnx.New(rc, legacysetnx.Options{TTL: time.Nanosecond, Unit: legacysetnx.Milliseconds}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Options.TTL 1ns: err = %v, want ErrInvalid", err)
	}
}
