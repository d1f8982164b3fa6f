package backend_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// TestLegacySetNXUnitRequired: a legacysetnx URL or Config without unit= is
// refused by ParseURL, Validate, OpenURL, Open and FromEnv with ErrInvalid,
// naming both choices and how to find out; nothing is dialled. The
// spellings legacysetnx.ParseUnit accepts are the ones the URL accepts.
func TestLegacySetNXUnitRequired(t *testing.T) {
	ctx := context.Background()
	const pw = "Sup3rSecret"
	raw := "legacysetnx://app:" + pw + "@127.0.0.1:1?prefix=lock."
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Fatalf("%s: err = %v, want ErrInvalid", what, err)
		}
		for _, want := range []string{"unit=s", "unit=ms", "lockswap inspect", "10 digits", "13 digits"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: message lacks %q: %v", what, want, err)
			}
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("%s: message contains the password: %v", what, err)
		}
	}
	_, err := backend.ParseURL(raw)
	check("ParseURL", err)
	_, err = backend.OpenURL(ctx, raw)
	check("OpenURL", err)
	t.Setenv("LOCKS_WITHOUT_UNIT", raw)
	_, err = backend.FromEnv(ctx, "LOCKS_WITHOUT_UNIT")
	check("FromEnv", err)
	c := backend.Config{Backend: backend.LegacySetNX, Addrs: []string{"127.0.0.1:1"}, Password: pw}
	check("Validate", c.Validate())
	_, err = backend.Open(ctx, c, backend.Clients{})
	check("Open", err)

	// The URL accepts exactly the spellings of legacysetnx.ParseUnit.
	for _, u := range []string{"s", "sec", "second", "seconds", "S", "ms", "milli", "millis", "millisecond", "milliseconds", "MS", "minutes", "h", "1", "unset"} {
		_, uerr := legacysetnx.ParseUnit(u)
		_, perr := backend.ParseURL("legacysetnx://h:1?unit=" + u)
		if (uerr == nil) != (perr == nil) {
			t.Errorf("unit=%s: legacysetnx.ParseUnit says %v, backend.ParseURL says %v: they must agree", u, uerr, perr)
		}
		if perr != nil && !errors.Is(perr, lockswap.ErrInvalid) {
			t.Errorf("unit=%s: %v, want ErrInvalid", u, perr)
		}
	}
	if _, err := backend.ParseURL("legacysetnx://h:1?unit=seconds"); err != nil {
		t.Errorf("unit=seconds: %v", err)
	}
}

// TestLegacySetNXTTLRange: ttl= outside the unit's range (legacysetnx
// Unit.TTLRange) is refused when the URL is parsed, before anything is
// dialled or written.
func TestLegacySetNXTTLRange(t *testing.T) {
	for raw, mention := range map[string]string{
		"legacysetnx://h:1?unit=s&ttl=500ms":                     "1s",
		"legacysetnx://h:1?unit=s&ttl=999ms":                     "1s",
		"legacysetnx://h:1?unit=ms&ttl=5ms":                      "ttl",
		"legacysetnx://h:1?unit=ms&ttl=8761h":                    "8760h",
		"legacysetnx://h:1?unit=s&ttl=9223372036854775807ns":     "8760h",
		"legacysetnx://h:1?unit=ms&ttl=2562047h47m16.854775807s": "8760h",
	} {
		_, err := backend.ParseURL(raw)
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: err = %v, want ErrInvalid mentioning %q", raw, err, mention)
		}
	}
	for _, raw := range []string{"legacysetnx://h:1?unit=s&ttl=1s", "legacysetnx://h:1?unit=ms&ttl=10ms", "legacysetnx://h:1?unit=s&ttl=8760h"} {
		if _, err := backend.ParseURL(raw); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// TestOpenLegacySetNX opens legacysetnx from a URL in each unit and checks
// the timestamps it writes, and that the URL's ttl= is the default TTL.
func TestOpenLegacySetNX(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	for _, tc := range []struct {
		unit    string
		digits  int
		wantTTL time.Duration
	}{{"s", 10, 3 * time.Second}, {"ms", 13, 1500 * time.Millisecond}} {
		lk, err := backend.OpenURL(ctx, "legacysetnx://"+mr.Addr()+"?prefix=lock.&unit="+tc.unit+"&ttl="+tc.wantTTL.String())
		if err != nil {
			t.Fatalf("unit=%s: %v", tc.unit, err)
		}
		l, err := lk.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatalf("unit=%s: %v", tc.unit, err)
		}
		v, _ := mr.Get("lock.k")
		if len(v) != tc.digits {
			t.Errorf("unit=%s: stored %q, want %d digits", tc.unit, v, tc.digits)
		}
		if d := time.Until(l.Deadline()); d > tc.wantTTL || d < tc.wantTTL/2 {
			t.Errorf("unit=%s: Deadline in %v, want about the URL's ttl %v", tc.unit, d, tc.wantTTL)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lk.Close()
	}
	// A given client: the unit is still required.
	rc := goredis.New(redistest.GoRedisClient(t, mr.Addr()))
	if _, err := backend.Open(ctx, backend.Config{Backend: backend.LegacySetNX}, backend.Clients{Redis: []redisclient.Client{rc}}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Open with a given client and no unit: %v, want ErrInvalid", err)
	}
	lk, err := backend.Open(ctx, backend.Config{Backend: backend.LegacySetNX, Unit: "ms"}, backend.Clients{Redis: []redisclient.Client{rc}})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
}

// TestLegacySetNXDocURLs: the URLs docs/migration.md and
// docs/legacysetnx.md show parse, those of migration.md's code blocks
// read from the page.
func TestLegacySetNXDocURLs(t *testing.T) {
	urls := []string{"legacysetnx://redis:6379?prefix=lock.&unit=s"}
	doc, err := os.ReadFile("../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "migrate://") {
			urls = append(urls, line)
		}
	}
	if len(urls) < 2 {
		t.Fatal("docs/migration.md shows no migrate:// URL")
	}
	for _, raw := range urls {
		if _, err := backend.ParseURL(raw); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
