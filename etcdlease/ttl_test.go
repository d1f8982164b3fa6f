package etcdlease

import (
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestOptionsTTL: Options.TTL is the TTL of a call without WithTTL, a
// call's WithTTL wins, and New and Open refuse a TTL out of range.
func TestOptionsTTL(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "/ttl/", TTL: 3 * time.Second})
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
		if d := time.Until(l.Deadline()); d > tc.want || d < tc.want-2*time.Second {
			t.Errorf("%d options: deadline in %v, want about %v", len(tc.opts), d, tc.want)
		}
		l.Release(ctx)
	}
	if _, err := New(lk.Client(), Options{TTL: time.Nanosecond}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Options.TTL 1ns: err = %v, want ErrInvalid", err)
	}
	if _, err := Open(Config{Endpoints: srv.Endpoints(), TTL: lockswap.MaxTTL + time.Hour}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Config.TTL above MaxTTL: err = %v, want ErrInvalid", err)
	}
}
