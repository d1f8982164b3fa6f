package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestSemaphoreConformance runs the semaphore suite for singleredis on
// redis-server (miniredis's TIME does not follow its time travel, which
// the permits' expiries are kept in): go-redis plain, fenced and with
// fair wait, and the other clients fenced (the scripts are the same; the
// clients differ in how they carry them).
func TestSemaphoreConformance(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for i, c := range redistest.Clients {
		opts := []singleredis.Options{{Prefix: "fenced:", Fence: true}}
		if i == 0 {
			opts = append(opts, singleredis.Options{Prefix: "plain:"}, singleredis.Options{Prefix: "fair:", Fence: true, FairWait: true})
		}
		for _, o := range opts {
			t.Run(fmt.Sprintf("%s/fence=%v/fair=%v", c.Name, o.Fence, o.FairWait), func(t *testing.T) {
				conformance.RunSemaphore(t, harnessOpts(srv.Addr(), c.New, o, 300*time.Millisecond, nil))
			})
		}
	}
}

// TestPermitKeys: a semaphore is one hash at the mutex's key, with the
// limit, each permit's token and its expiry in the server's clock; the
// hash expires with its longest permit, loses a slot's fields when that
// permit is released, and is deleted with the last permit, leaving only
// the fence counter, which expires (FenceCounterTTL).
func TestPermitKeys(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "p:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	a, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h, err := rdb.HGetAll(ctx, "p:pool").Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if h["limit"] != "3" || h["t0"] != a.Token() || h["t1"] != b.Token() || len(h) != 5 {
		t.Fatalf("hash = %v, want limit 3, t0 = %s, t1 = %s and their expiries", h, a.Token(), b.Token())
	}
	for slot, ttl := range []time.Duration{time.Minute, 2 * time.Minute} {
		e, _ := strconv.ParseInt(h[fmt.Sprintf("e%d", slot)], 10, 64)
		if left := time.UnixMilli(e).Sub(now); left <= 0 || left > ttl {
			t.Errorf("slot %d expires %v after the server's clock, want within its TTL %v", slot, left, ttl)
		}
	}
	if pttl := rdb.PTTL(ctx, "p:pool").Val(); pttl <= time.Minute || pttl > 2*time.Minute {
		t.Errorf("the hash's PTTL is %v, want that of its longest permit (2m)", pttl)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := rdb.HGetAll(ctx, "p:pool").Val(); len(h) != 3 || h["t1"] != "" || h["e1"] != "" {
		t.Errorf("after releasing slot 1 the hash is %v, want limit, t0 and e0 only", h)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	keys := rdb.Keys(ctx, "*").Val()
	if len(keys) != 1 || keys[0] != singleredis.FenceKey("p:pool") {
		t.Errorf("after the last permit the keys are %v, want the fence counter %s only", keys, singleredis.FenceKey("p:pool"))
	}
	if pttl := rdb.PTTL(ctx, singleredis.FenceKey("p:pool")).Val(); pttl <= 0 || pttl > singleredis.FenceCounterTTL {
		t.Errorf("the fence counter's PTTL is %v, want at most FenceCounterTTL", pttl)
	}
}

// TestPermitRefusals: a key that holds a mutex, another Redis type, or a
// hash that is no semaphore is refused with ErrInvalid naming it, and
// left as it was; a mutex on a semaphore's key is refused the same way.
func TestPermitRefusals(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	for _, fence := range []bool{false, true} {
		lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: fence})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Close()
		rdb.FlushAll(ctx)
		rdb.Set(ctx, "str", "someone", time.Minute)
		rdb.LPush(ctx, "list", "x")
		rdb.HSet(ctx, "hash", "field", "x")
		for _, key := range []string{"str", "list", "hash"} {
			_, err := lk.TryAcquire(ctx, key, lockswap.WithPermits(2))
			if !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("fence=%v: a permit of %q: err = %v, want ErrInvalid", fence, key, err)
			}
		}
		if v := rdb.Get(ctx, "str").Val(); v != "someone" {
			t.Errorf("the mutex's key was changed to %q", v)
		}
		if h := rdb.HGetAll(ctx, "hash").Val(); len(h) != 1 || h["field"] != "x" {
			t.Errorf("the foreign hash was changed to %v", h)
		}
		p, err := lk.TryAcquire(ctx, "sem", lockswap.WithPermits(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TryAcquire(ctx, "sem"); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("fence=%v: the mutex of a semaphore's key: err = %v, want ErrInvalid", fence, err)
		}
		if err := p.Release(ctx); err != nil {
			t.Errorf("the permit after the refused mutex: %v", err)
		}
	}
}
