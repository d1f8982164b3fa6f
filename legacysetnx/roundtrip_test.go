package legacysetnx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// TestContendedAttemptIsOneRequest: an attempt on a key that holds a live
// timestamp (TryAcquire, and each attempt of an Acquire that waits) costs
// one request, and so does one on a key that holds another Redis type,
// refused with ErrInvalid and left as it was: the acquire script reads the
// key, so the server itself says what holds it.
func TestContendedAttemptIsOneRequest(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	ctx := context.Background()
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			key, hash := "contended1rt:"+c.Name, "contended1rt:hash:"+c.Name
			opts := legacysetnx.Options{Unit: legacysetnx.Milliseconds}
			holder := newLocker(t, c.New, srv.Addr(), opts)
			if _, err := holder.Acquire(ctx, key, lockswap.WithTTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			cc := &redistest.Counting{Client: c.New(t, srv.Addr())}
			lk, err := legacysetnx.New(cc, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lk.Close() })

			before := cc.Requests()
			if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("TryAcquire on a held key: %v, want ErrHeld", err)
			}
			if n := cc.Requests() - before; n != 1 {
				t.Errorf("TryAcquire on a held key sent %d requests, want 1", n)
			}
			const attempts = 4
			before = cc.Requests()
			_, err = lk.Acquire(ctx, key, lockswap.WithRetry(lockswap.LimitedRetry(time.Millisecond, attempts)))
			if !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("Acquire of %d attempts on a held key: %v, want ErrHeld", attempts, err)
			}
			if n := cc.Requests() - before; n != attempts {
				t.Errorf("Acquire of %d attempts on a held key sent %d requests, want %d", attempts, n, attempts)
			}

			raw.HSet(ctx, hash, "field", "someone else's data")
			before = cc.Requests()
			if _, err := lk.TryAcquire(ctx, hash); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("TryAcquire on a key holding a hash: %v, want ErrInvalid", err)
			}
			if n := cc.Requests() - before; n != 1 {
				t.Errorf("TryAcquire on a key holding a hash sent %d requests, want 1", n)
			}
			if v := raw.HGet(ctx, hash, "field").Val(); v != "someone else's data" {
				t.Errorf("the hash under the key was changed to %q", v)
			}
		})
	}
}
