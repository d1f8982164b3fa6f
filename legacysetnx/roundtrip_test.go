package legacysetnx_test

import (
	"context"
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

			redistest.CheckContended(t, lk, key, cc.Requests, 1)
			raw.HSet(ctx, hash, "field", "someone else's data")
			redistest.CheckNotLock(t, lk, hash, "another Redis type", cc.Requests, 1)
			if v := raw.HGet(ctx, hash, "field").Val(); v != "someone else's data" {
				t.Errorf("the hash under the key was changed to %q", v)
			}
		})
	}
}
