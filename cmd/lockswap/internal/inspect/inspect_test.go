package inspect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
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
			if _, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if _, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Minute)); err != nil {
				t.Fatal(err)
			}
			mr.HSet("lock:huge", "limit", "30000000")
			mr.Set("lock:old-live", strconv.FormatInt(now.Unix()+60, 10))
			mr.Set("lock:old-dead", strconv.FormatInt(now.Unix()-60, 10))
			mr.Set("lock:junk", "hello")
			mr.Set("other:x", "not under the prefix")
			listing, err := inspect.Scan(ctx, rc, inspect.Query{Prefix: "lock:", Now: now})
			if err != nil || listing.More {
				t.Fatalf("Scan: more %v, %v", listing.More, err)
			}
			entries := listing.Entries
			got := map[string]inspect.Entry{}
			for _, e := range entries {
				got[e.Key] = e
			}
			if len(got) != 7 {
				t.Fatalf("got %d keys %v, want the 7 under lock:", len(got), got)
			}
			if e := got["lock:doc"]; e.Kind != inspect.KindRWLock || e.Value != "1 read held" || e.TTL <= 0 || e.TTL > time.Minute {
				t.Errorf("read-write lock = %+v, want 1 read held, expiring within its hold's TTL", e)
			}
			if e := got["lock:huge"]; e.Kind != inspect.KindOther {
				t.Errorf("a hash with a limit beyond MaxPermits = %+v, want other", e)
			}
			if e := got["lock:pool"]; e.Kind != inspect.KindSemaphore || e.Value != "limit 3, 1 held" || e.TTL <= 0 || e.TTL > time.Minute {
				t.Errorf("semaphore = %+v, want limit 3, 1 held, expiring within its permit's TTL", e)
			}
			if e := got["lock:a"]; e.Kind != inspect.KindToken || e.Value != l.Token() || e.TTL <= 0 || e.TTL > time.Minute {
				t.Errorf("token lock = %+v", e)
			}
			// Fence counters carry the key in a hash tag: "{lock:a}:fence".
			fl, err := inspect.Scan(ctx, rc, inspect.Query{Prefix: "{lock:", Now: now})
			fences := fl.Entries
			if err != nil || len(fences) != 3 || fences[0].Key != singleredis.FenceKey("lock:a") || fences[1].Key != singleredis.FenceKey("lock:doc") || fences[2].Key != singleredis.FenceKey("lock:pool") || fences[2].Kind != inspect.KindFence || fences[1].Kind != inspect.KindFence || fences[0].Kind != inspect.KindFence || !positive(fences[0].Value) {
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
			inspect.Print(&buf, listing, now)
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
				l, err := inspect.Scan(ctx, rc, inspect.Query{Prefix: "lock.", Now: now})
				if err != nil {
					t.Fatal(err)
				}
				entries := l.Entries
				got := map[string]inspect.Entry{}
				for _, e := range entries {
					got[e.Key] = e
				}
				var buf bytes.Buffer
				if err := inspect.Print(&buf, l, now); err != nil {
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
			if s != (inspect.Summary{Milliseconds: 3, Unknown: 1, LiveOld: 2}) || s.Unit() != inspect.UnitMilliseconds {
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

// TestScanLimit: on a real redis-server, where SCAN takes several calls,
// Scan lists every key without a limit (reporting progress after each
// call), and with a limit lists that many and says that others may match,
// which Print repeats under the summary.
func TestScanLimit(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	const n = 1500
	pipe := raw.Pipeline()
	for i := range n {
		pipe.Set(ctx, fmt.Sprintf("lock.%04d", i), "0123456789abcdef0123456789abcdef", 0)
	}
	pipe.Set(ctx, "other", "x", 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	rc := redistest.GoRedis(t, srv.Addr())

	var progress [][2]int
	all, err := inspect.Scan(ctx, rc, inspect.Query{Prefix: "lock.", Now: time.Now(),
		Progress: func(listed, calls int) { progress = append(progress, [2]int{listed, calls}) }})
	if err != nil || len(all.Entries) != n || all.More {
		t.Fatalf("no limit: %d keys, more %v, %v; want %d, false", len(all.Entries), all.More, err, n)
	}
	if !slices.IsSortedFunc(all.Entries, func(a, b inspect.Entry) int { return strings.Compare(a.Key, b.Key) }) {
		t.Error("the entries are not sorted by key")
	}
	if len(progress) < n || progress[len(progress)-1][0] != n || progress[len(progress)-1][1] < 2 {
		t.Errorf("progress: %d calls, the last %v; want one per key at least, the last with all %d keys after several SCAN calls", len(progress), progress[len(progress)-1], n)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i][0] < progress[i-1][0] || progress[i][1] < progress[i-1][1] {
			t.Errorf("progress went back from %v to %v: want counts that only grow", progress[i-1], progress[i])
			break
		}
	}

	some, err := inspect.Scan(ctx, rc, inspect.Query{Prefix: "lock.", Limit: 1000, Now: time.Now()})
	if err != nil || len(some.Entries) != 1000 || !some.More {
		t.Fatalf("limit 1000: %d keys, more %v, %v; want 1000, true", len(some.Entries), some.More, err)
	}
	var buf bytes.Buffer
	if err := inspect.Print(&buf, some, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "listed 1000 of the matching keys (--limit)") {
		t.Errorf("a listing cut by the limit does not say so:\n%s", tail(buf.String()))
	}
	buf.Reset()
	if err := inspect.Print(&buf, all, time.Now()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "others may match") {
		t.Errorf("a complete listing says others may match:\n%s", tail(buf.String()))
	}
}

// tail is the last lines of a printed listing.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], "\n")
}

// hooked is a client that runs before ahead of each command it is given.
type hooked struct {
	redisclient.Client
	before func(cmd, key string) error
}

func (h hooked) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) != 2 {
		return h.Client.Do(ctx, args...)
	}
	if key, ok := args[1].(string); ok {
		if err := h.before(fmt.Sprint(args[0]), key); err != nil {
			return nil, err
		}
	}
	return h.Client.Do(ctx, args...)
}

// Run hooks the script that reads a key (its type, value and PTTL at
// once) as the command "READ".
func (h hooked) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	if len(keys) == 1 {
		if err := h.before("READ", keys[0]); err != nil {
			return nil, err
		}
	}
	return h.Client.Run(ctx, s, keys, args...)
}

// TestScanLeavesOutVanishedKeys: a key deleted (or expired) between SCAN
// and its read is not listed: it is not a lock of any kind any more.
func TestScanLeavesOutVanishedKeys(t *testing.T) {
	mr := miniredis.RunT(t)
	for _, k := range []string{"lock.kept", "lock.gone-before-read"} {
		mr.Set(k, "0123456789abcdef0123456789abcdef")
	}
	rc := hooked{Client: redistest.GoRedis(t, mr.Addr()), before: func(cmd, key string) error {
		if cmd == "READ" && key == "lock.gone-before-read" {
			mr.Del(key)
		}
		return nil
	}}
	l, err := inspect.Scan(context.Background(), rc, inspect.Query{Prefix: "lock.", Now: time.Now()})
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Key != "lock.kept" {
		t.Fatalf("listing %+v, %v; want lock.kept alone", l.Entries, err)
	}
}

// TestScanFailureKeepsWhatWasListed: when a request fails halfway, Scan
// returns the keys it listed before with an error that says the listing
// is incomplete and wraps the cause.
func TestScanFailureKeepsWhatWasListed(t *testing.T) {
	mr := miniredis.RunT(t)
	for i := range 5 {
		mr.Set(fmt.Sprintf("lock.%d", i), "0123456789abcdef0123456789abcdef")
	}
	broken := errors.New("connection reset")
	reads := 0
	rc := hooked{Client: redistest.GoRedis(t, mr.Addr()), before: func(cmd, key string) error {
		if cmd == "READ" {
			if reads++; reads == 4 {
				return broken
			}
		}
		return nil
	}}
	l, err := inspect.Scan(context.Background(), rc, inspect.Query{Prefix: "lock.", Now: time.Now()})
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "listing incomplete (3 keys listed)") || len(l.Entries) != 3 || !l.Incomplete {
		t.Fatalf("Scan = %d keys (incomplete %v), %v; want the 3 listed before the failure, marked incomplete, and an error saying so", len(l.Entries), l.Incomplete, err)
	}
	var buf bytes.Buffer
	if err := inspect.Print(&buf, l, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "listing incomplete: it stopped after 3 keys") {
		t.Errorf("the printed listing does not say it is incomplete:\n%s", tail(buf.String()))
	}
}

// dupScan is a client whose SCAN replies return every key twice, as SCAN
// may while Redis resizes its hash table.
type dupScan struct{ redisclient.Client }

func (d dupScan) Do(ctx context.Context, args ...any) (any, error) {
	v, err := d.Client.Do(ctx, args...)
	if arr, ok := v.([]any); ok && err == nil && args[0] == "SCAN" && len(arr) == 2 {
		keys, _ := arr[1].([]any)
		arr[1] = append(slices.Clone(keys), keys...)
	}
	return v, err
}

// TestScanListsAKeyOnce: a key that SCAN returns more than once is listed,
// counted against the limit, and summarised once.
func TestScanListsAKeyOnce(t *testing.T) {
	mr := miniredis.RunT(t)
	for i := range 3 {
		mr.Set(fmt.Sprintf("lock.%d", i), strconv.FormatInt(time.Now().Unix()+60, 10))
	}
	rc := dupScan{redistest.GoRedis(t, mr.Addr())}
	l, err := inspect.Scan(context.Background(), rc, inspect.Query{Prefix: "lock.", Limit: 3, Now: time.Now()})
	if err != nil || len(l.Entries) != 3 || l.More {
		t.Fatalf("listing %d keys, more %v, %v; want the 3 keys once each, complete", len(l.Entries), l.More, err)
	}
	if s := inspect.Summarize(l.Entries); s.Seconds != 3 {
		t.Errorf("summary %+v: want 3 timestamps in seconds", s)
	}
}
