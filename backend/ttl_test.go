package backend_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/migrate"
	"github.com/lockswap/lockswap/singleredis"
)

// TestOpenReturnsBackendType: ttl= is the backend's own default TTL, so
// Open returns the backend's type whatever the URL, and that type reports
// the TTL (lockswap.Do renews with it).
func TestOpenReturnsBackendType(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	for raw, want := range map[string]time.Duration{
		"singleredis://" + mr.Addr():             10 * time.Second,
		"singleredis://" + mr.Addr() + "?ttl=7s": 7 * time.Second,
	} {
		lk, err := backend.OpenURL(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		sr, ok := lk.(*singleredis.Locker)
		if !ok {
			t.Fatalf("%s: Open returned %T, want *singleredis.Locker", raw, lk)
		}
		if sr.DefaultTTL() != want {
			t.Errorf("%s: DefaultTTL = %v, want %v", raw, sr.DefaultTTL(), want)
		}
		lk.Close()
	}
	enc := url.QueryEscape
	raw := "migrate://?phase=dual&ttl=3s&legacy=" + enc("legacysetnx://"+mr.Addr()+"?prefix=lock.&unit=ms") +
		"&target=" + enc("singleredis://"+mr.Addr()+"?prefix=locks:")
	lk, err := backend.OpenURL(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if _, ok := lk.(*migrate.Locker); !ok {
		t.Fatalf("migrate URL with ttl=: Open returned %T, want *migrate.Locker", lk)
	}
	l, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if got := mr.TTL("locks:job"); got != 3*time.Second {
		t.Errorf("target key TTL %v, want the migrate URL's ttl 3s", got)
	}
	if d := time.Until(l.Deadline()); d > 3*time.Second || d < 2*time.Second {
		t.Errorf("migrate lock deadline in %v, want about the URL's ttl 3s", d)
	}
}
