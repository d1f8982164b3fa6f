package otel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	lockotel "github.com/lockswap/lockswap/otel"
	"github.com/lockswap/lockswap/singleredis"
)

// TestSingleRedisLostAndUnavailable, over a real redis-server: a lock whose
// key is deleted on the server is counted lost when Extend or Release
// finds it gone, and with the server stopped an attempt is unavailable
// and a Release is a release failure.
func TestSingleRedisLostAndUnavailable(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	inner, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "locks:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder(t)
	lk := r.wrap(inner)
	defer lk.Close()
	ctx := context.Background()

	a, err := lk.TryAcquire(ctx, "job-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := lk.Acquire(ctx, "job-b")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := raw.Del(ctx, "locks:job-a", "locks:job-b").Result(); err != nil || n != 2 {
		t.Fatalf("DEL of the lock keys on the server: %d %v", n, err)
	}
	if err := a.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Release of a deleted lock: %v, want ErrLost", err)
	}
	if err := b.Extend(ctx, lockswap.DefaultTTL); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Extend of a deleted lock: %v, want ErrLost", err)
	}
	_ = b.Release(ctx)

	c, err := lk.TryAcquire(ctx, "job-c")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, err := lk.TryAcquire(ctx, "job-d"); !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("TryAcquire with the server stopped: %v, want ErrUnavailable", err)
	}
	if err := c.Release(ctx); !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Release with the server stopped: %v, want ErrUnavailable", err)
	}

	ms := r.collect(t)
	be := lockotel.AttrBackend.String("singleredis")
	if n := counter(t, ms, lockotel.MetricLocksLost, be, operation(lockotel.OpRelease)); n != 1 {
		t.Errorf("locks lost at release: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost, be, operation(lockotel.OpExtend)); n != 1 {
		t.Errorf("locks lost at extend: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost); n != 2 {
		t.Errorf("locks lost: %d, want 2", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, be, outcome(lockotel.OutcomeLost)); n != 2 {
		t.Errorf("lost holds: %d, want 2", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration, be, operation(lockotel.OpTryAcquire), outcome(lockotel.OutcomeUnavailable)); n != 1 {
		t.Errorf("unavailable attempts: %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricReleaseFailures, be, outcome(lockotel.OutcomeUnavailable)); n != 1 {
		t.Errorf("release failures (unavailable): %d, want 1", n)
	}
	if n := counter(t, ms, lockotel.MetricReleaseFailures); n != 1 {
		t.Errorf("release failures: %d, want 1 (a lost lock's Release is not one)", n)
	}
	for _, s := range r.ended("lockswap.TryAcquire") {
		if oc, _ := spanAttr(s, lockotel.AttrOutcome); oc.AsString() == lockotel.OutcomeAcquired {
			if f, ok := spanAttr(s, lockotel.AttrFence); !ok || f.AsInt64() <= 0 {
				t.Errorf("acquire span of a fenced singleredis lock: fence %v %v", f, ok)
			}
		}
	}
}
