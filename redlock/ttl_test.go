package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// TestOptionsTTL: Options.TTL is the TTL of a call without WithTTL, a
// call's WithTTL wins, and New refuses a TTL the Locker cannot use.
func TestOptionsTTL(t *testing.T) {
	ctx := context.Background()
	var clients []redisclient.Client
	var servers []*miniredis.Miniredis
	for range 3 {
		mr := miniredis.RunT(t)
		servers = append(servers, mr)
		clients = append(clients, redistest.GoRedis(t, mr.Addr()))
	}
	lk, err := redlock.New(clients, redlock.Options{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if lk.DefaultTTL() != 3*time.Second {
		t.Errorf("DefaultTTL = %v, want Options.TTL 3s", lk.DefaultTTL())
	}
	for key, want := range map[string]time.Duration{"default": 3 * time.Second, "own": 5 * time.Second} {
		var opts []lockswap.Option
		if key == "own" {
			opts = append(opts, lockswap.WithTTL(want))
		}
		l, err := lk.TryAcquire(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i, mr := range servers {
			if got := mr.TTL(key); got != want {
				t.Errorf("%s: instance %d key TTL %v, want %v", key, i, got, want)
			}
		}
		l.Release(ctx)
	}
	for _, bad := range []time.Duration{-time.Second, time.Millisecond, lockswap.MaxTTL + time.Hour} {
		if _, err := redlock.New(clients, redlock.Options{TTL: bad}); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Options.TTL %v: err = %v, want ErrInvalid", bad, err)
		}
	}
}
