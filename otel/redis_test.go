package otel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	lockotel "github.com/lockswap/lockswap/otel"
	"github.com/lockswap/lockswap/redisclient/goredis"
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

// TestSingleRedisNoPassword: with WithKeys, the most the package records,
// neither the right password nor a wrong one appears in any metric or span
// of a Locker whose client authenticates (or fails to) against a
// redis-server that requires a password.
func TestSingleRedisNoPassword(t *testing.T) {
	const right, wrong = "right-pw-5d1e7c", "wrong-pw-9a3b2f"
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx := context.Background()
	// Set after start: the server helper's readiness PING has no password.
	if err := redistest.GoRedisClient(t, srv.Addr()).ConfigSet(ctx, "requirepass", right).Err(); err != nil {
		t.Fatal(err)
	}
	r := newRecorder(t)
	for _, pw := range []string{right, wrong} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: pw, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		inner, err := singleredis.New(goredis.New(rdb), singleredis.Options{Fence: true})
		if err != nil {
			t.Fatal(err)
		}
		lk := r.wrap(inner, lockotel.WithKeys())
		defer lk.Close()
		l, err := lk.TryAcquire(ctx, "job-"+pw[:5])
		if pw == wrong {
			if err == nil {
				t.Fatal("TryAcquire with a wrong password succeeded")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TryAcquire(ctx, "job-"+pw[:5]); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("second TryAcquire: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ms := r.collect(t)
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration); n != 3 {
		t.Fatalf("%d acquire values, want 3", n)
	}
	for name, m := range ms {
		for _, set := range attributeSets(m.Data) {
			for _, kv := range set.ToSlice() {
				if v := kv.Value.Emit(); strings.Contains(v, right) || strings.Contains(v, wrong) {
					t.Errorf("metric %s attribute %s has a password: %q", name, kv.Key, v)
				}
			}
		}
	}
	var failed int
	for _, s := range r.spans.Ended() {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, kv.Value.Emit())
		}
		for _, ev := range s.Events() {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, kv.Value.Emit())
			}
		}
		for _, text := range texts {
			if strings.Contains(text, right) || strings.Contains(text, wrong) {
				t.Errorf("span %s has a password: %q", s.Name(), text)
			}
		}
		if s.Status().Code == codes.Error {
			failed++
		}
	}
	if failed == 0 {
		t.Error("the wrong password's attempt left no failed span: nothing was checked")
	}
}
