package inspect_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/singleredis"
)

func TestScan(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			ctx := context.Background()
			now := time.Now().Truncate(time.Second)
			rc := c.New(t, mr.Addr())
			lk, _ := singleredis.New(rc, singleredis.Options{Prefix: "lock:", Fence: true})
			l, err := lk.TryAcquire(ctx, "a", lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			mr.Set("lock:old-live", strconv.FormatInt(now.Unix()+60, 10))
			mr.Set("lock:old-dead", strconv.FormatInt(now.Unix()-60, 10))
			mr.Set("lock:junk", "hello")
			mr.Set("other:x", "not under the prefix")
			entries, err := inspect.Scan(ctx, rc, "lock:", 0, now)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]inspect.Entry{}
			for _, e := range entries {
				got[e.Key] = e
			}
			if len(got) != 4 {
				t.Fatalf("got %d keys %v, want the 4 under lock:", len(got), got)
			}
			if e := got["lock:a"]; e.Kind != inspect.KindToken || e.Value != l.Token() || e.TTL <= 0 || e.TTL > time.Minute {
				t.Errorf("token lock = %+v", e)
			}
			// Fence counters carry the key in a hash tag: "{lock:a}:fence".
			fences, err := inspect.Scan(ctx, rc, "{lock:", 0, now)
			if err != nil || len(fences) != 1 || fences[0].Key != singleredis.FenceKey("lock:a") || fences[0].Kind != inspect.KindFence || !positive(fences[0].Value) {
				t.Errorf("fence counters = %+v, %v", fences, err)
			}
			if e := got["lock:old-live"]; e.Kind != inspect.KindLegacy || e.Unit != inspect.UnitSeconds || e.Expired || e.TTL >= 0 {
				t.Errorf("live legacy lock = %+v", e)
			}
			if e := got["lock:old-dead"]; e.Kind != inspect.KindLegacy || e.Unit != inspect.UnitSeconds || !e.Expired {
				t.Errorf("expired legacy lock = %+v", e)
			}
			if e := got["lock:junk"]; e.Kind != inspect.KindOther {
				t.Errorf("junk = %+v", e)
			}
			var buf bytes.Buffer
			inspect.Print(&buf, entries, now)
			for _, want := range []string{"lock:old-dead", "expired 1m0s ago", "live, 1m0s left", l.Token(), "UNIT", "seconds",
				"legacy timestamps: 2 in seconds, 0 in milliseconds, 0 unknown", "needs unit=s"} {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("printed table lacks %q:\n%s", want, buf.String())
				}
			}
		})
	}
}

// TestUnits: Scan reports the unit of each legacy value (seconds,
// milliseconds, unknown for a number in neither range), and the summary
// says which unit= a legacysetnx Locker sharing the keys needs, or that the
// keys do not tell.
func TestUnits(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			ctx := context.Background()
			rc := c.New(t, mr.Addr())
			now := time.UnixMilli(1_800_000_000_500)
			scan := func() ([]inspect.Entry, map[string]inspect.Entry, string) {
				t.Helper()
				entries, err := inspect.Scan(ctx, rc, "lock.", 0, now)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]inspect.Entry{}
				for _, e := range entries {
					got[e.Key] = e
				}
				var buf bytes.Buffer
				if err := inspect.Print(&buf, entries, now); err != nil {
					t.Fatal(err)
				}
				return entries, got, buf.String()
			}

			// No legacy keys: the unit cannot be told.
			mr.Set("lock.tok", "0123456789abcdef0123456789abcdef")
			entries, _, out := scan()
			if s := inspect.Summarize(entries); s != (inspect.Summary{}) || s.Unit() != inspect.UnitUnknown || !strings.Contains(out, "unit: unknown") {
				t.Errorf("no legacy keys: summary %+v, unit %v, output:\n%s", s, s.Unit(), out)
			}

			// Milliseconds only (npm redis-lock style), one live, one expired,
			// one fractional; and a number in neither range.
			mr.Set("lock.ms-live", "1800000060500")
			mr.Set("lock.ms-dead", "1799999940500")
			mr.Set("lock.ms-frac", "1800000060500.5")
			mr.Set("lock.odd", "42")
			entries, got, out := scan()
			for _, k := range []string{"lock.ms-live", "lock.ms-dead", "lock.ms-frac"} {
				if e := got[k]; e.Kind != inspect.KindLegacy || e.Unit != inspect.UnitMilliseconds {
					t.Errorf("%s = %+v, want legacy in milliseconds", k, e)
				}
			}
			if e := got["lock.ms-live"]; e.Expired || !e.Expiry.Equal(now.Add(time.Minute)) {
				t.Errorf("ms-live = %+v, want live until now+1m", e)
			}
			if e := got["lock.ms-dead"]; !e.Expired || !e.Expiry.Equal(now.Add(-time.Minute)) {
				t.Errorf("ms-dead = %+v, want expired a minute ago", e)
			}
			if e := got["lock.ms-frac"]; !e.Expiry.Equal(now.Add(time.Minute + 500*time.Microsecond)) {
				t.Errorf("ms-frac expiry = %v", e.Expiry)
			}
			if e := got["lock.odd"]; e.Kind != inspect.KindLegacy || e.Unit != inspect.UnitUnknown || e.Expired || !e.Expiry.IsZero() {
				t.Errorf("odd = %+v, want legacy with an unknown unit and no expiry", e)
			}
			if e := got["lock.tok"]; e.Kind != inspect.KindToken || e.Unit != "" {
				t.Errorf("token = %+v", e)
			}
			s := inspect.Summarize(entries)
			if s != (inspect.Summary{Milliseconds: 3, Unknown: 1}) || s.Unit() != inspect.UnitMilliseconds {
				t.Errorf("milliseconds: summary %+v, unit %v", s, s.Unit())
			}
			for _, want := range []string{"milliseconds", "unknown", "not a timestamp in s or ms", "3 in milliseconds", "needs unit=ms"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}

			// Both units under one prefix: the clients disagree.
			mr.Set("lock.s-live", "1800000060")
			entries, got, out = scan()
			if e := got["lock.s-live"]; e.Unit != inspect.UnitSeconds || e.Expired || !e.Expiry.Equal(time.Unix(1_800_000_060, 0)) {
				t.Errorf("s-live = %+v", e)
			}
			if s := inspect.Summarize(entries); s.Seconds != 1 || s.Milliseconds != 3 || s.Unit() != inspect.UnitUnknown || !strings.Contains(out, "MIXED") {
				t.Errorf("mixed: summary %+v, unit %v, output:\n%s", s, s.Unit(), out)
			}
		})
	}
}

// positive reports whether v is a positive integer (singleredis's fence
// counter: its first value need not be 1).
func positive(v string) bool {
	n, err := strconv.ParseUint(v, 10, 64)
	return err == nil && n > 0
}

func TestAddrDefaultsThePort(t *testing.T) {
	for in, want := range map[string]string{
		"redis.internal":      "redis.internal:6379",
		"127.0.0.1":           "127.0.0.1:6379",
		"127.0.0.1:6380":      "127.0.0.1:6380",
		"redis.internal:7000": "redis.internal:7000",
		"[::1]":               "[::1]:6379",
		"::1":                 "[::1]:6379",
		"[::1]:6380":          "[::1]:6380",
	} {
		if got := inspect.Addr(in); got != want {
			t.Errorf("Addr(%q) = %q, want %q", in, got, want)
		}
	}
}
