package cleanup_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/cleanup"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

// oneServer starts a redis-server and returns a go-redis adapter to it and
// its server time.
func oneServer(t *testing.T) (redisclient.Client, time.Time) {
	t.Helper()
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redistest.GoRedis(t, srv.Addr())
	now, err := c.Time(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c, now
}

func unix(t time.Time) string   { return strconv.FormatInt(t.Unix(), 10) }
func unixMs(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// TestCleanup: with a margin of an hour, the legacy key whose timestamp
// passed two hours ago is the only one deleted. Legacy keys that are live,
// passed less than the margin ago, have a Redis expiry, written by a lockswap client (dual
// phase, with a Redis expiry) or a number in neither unit stay; so do a
// token lock, a fence counter whose value looks like an old timestamp in
// milliseconds, a queue list and a string that is no lock value. A dry
// run (Find without Delete) changes nothing.
func TestCleanup(t *testing.T) {
	c, now := oneServer(t)
	ctx := context.Background()
	set := func(k, v string) {
		t.Helper()
		if _, err := c.Do(ctx, "SET", k, v); err != nil {
			t.Fatal(err)
		}
	}
	set("lock.dead", unix(now.Add(-2*time.Hour)))
	if _, err := c.Do(ctx, "SET", "lock.dead-ttl", unix(now.Add(-2*time.Hour)), "PX", "3600000"); err != nil {
		t.Fatal(err) // stale, but it expires on its own: kept
	}
	set("lock.recent", unix(now.Add(-10*time.Minute)))
	set("lock.live", unix(now.Add(time.Minute)))
	set("lock.tiny", "12345")
	set("lock.c:fence", unixMs(now.Add(-2*time.Hour)))
	set("lock.junk", "hello")
	if _, err := c.Do(ctx, "RPUSH", "lock.q", "waiter"); err != nil {
		t.Fatal(err)
	}
	sr, err := singleredis.New(c, singleredis.Options{Prefix: "lock."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sr.TryAcquire(ctx, "token", lockswap.WithTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	lg, err := legacysetnx.New(c, legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds, SetRedisExpiry: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.TryAcquire(ctx, "dual", lockswap.WithTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, c)

	p, err := cleanup.Find(ctx, c, "lock.", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Candidates) != 1 || p.Candidates[0].Key != "lock.dead" || p.Candidates[0].Value != before["lock.dead"] {
		t.Fatalf("candidates %+v, want lock.dead alone", p.Candidates)
	}
	// lock.dead, lock.dead-ttl, lock.recent, lock.live, lock.tiny, lock.dual
	if p.Legacy != 6 || p.Kept() != 5 || p.Listed != len(before) {
		t.Errorf("plan: %d listed, %d legacy, %d kept; want %d, 6, 5", p.Listed, p.Legacy, p.Kept(), len(before))
	}
	var out bytes.Buffer
	if err := cleanup.PrintPlan(&out, p); err != nil {
		t.Fatal(err)
	}
	// The timestamp is in whole seconds: it passed 2h plus a fraction of a
	// second ago.
	for _, want := range []string{"lock.dead", "expired 2h0m", "1 stale", "5 kept"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, out.String())
		}
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Errorf("planning changed the server: before %v, after %v", before, after)
	}

	r, err := cleanup.Delete(ctx, c, p.Candidates, nil)
	if err != nil || r.Deleted != 1 || len(r.Changed) != 0 {
		t.Fatalf("Delete: %+v, %v; want 1 deleted", r, err)
	}
	after := snapshot(t, c)
	delete(before, "lock.dead")
	if !maps.Equal(before, after) {
		t.Errorf("Delete changed other keys than lock.dead: want %v, got %v", before, after)
	}
}

// TestCleanupKeepsLockTakenAgain: a key that an old client took over
// between Find and Delete (GETSET of a new timestamp) stays, with the new
// timestamp, and is reported as changed.
func TestCleanupKeepsLockTakenAgain(t *testing.T) {
	c, now := oneServer(t)
	ctx := context.Background()
	if _, err := c.Do(ctx, "SET", "lock.x", unix(now.Add(-2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	p, err := cleanup.Find(ctx, c, "lock.", time.Hour, nil)
	if err != nil || len(p.Candidates) != 1 {
		t.Fatalf("Find: %+v, %v; want lock.x", p, err)
	}
	retaken := unix(now.Add(time.Minute))
	if _, _, err := c.GetSet(ctx, "lock.x", retaken); err != nil {
		t.Fatal(err)
	}
	r, err := cleanup.Delete(ctx, c, p.Candidates, nil)
	if err != nil || r.Deleted != 0 || len(r.Changed) != 1 || r.Changed[0] != "lock.x" {
		t.Fatalf("Delete: %+v, %v; want lock.x kept as changed", r, err)
	}
	if v, ok, err := c.Get(ctx, "lock.x"); err != nil || !ok || v != retaken {
		t.Errorf("lock.x = %q, %v, %v after Delete; want the old client's new timestamp %s", v, ok, err, retaken)
	}
	var out bytes.Buffer
	if err := cleanup.PrintResult(&out, p, r); err != nil || !strings.Contains(out.String(), "kept: lock.x") {
		t.Errorf("result %q, %v; want lock.x named as kept", out.String(), err)
	}
}

// TestCleanupRefusesMixedUnits: stale keys in seconds and in milliseconds
// under one prefix plan nothing (ErrMixedUnits) and change nothing.
func TestCleanupRefusesMixedUnits(t *testing.T) {
	c, now := oneServer(t)
	ctx := context.Background()
	for k, v := range map[string]string{"lock.s": unix(now.Add(-2 * time.Hour)), "lock.ms": unixMs(now.Add(-2 * time.Hour))} {
		if _, err := c.Do(ctx, "SET", k, v); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, c)
	p, err := cleanup.Find(ctx, c, "lock.", time.Hour, nil)
	if !errors.Is(err, cleanup.ErrMixedUnits) || len(p.Candidates) != 0 {
		t.Fatalf("Find: %d candidates, %v; want none and ErrMixedUnits", len(p.Candidates), err)
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Errorf("a refused plan changed the server: before %v, after %v", before, after)
	}
}

// TestCleanupServerClock: a key's age is judged by the server's clock, not
// the local one (miniredis, whose clock the test sets). The server 3 hours
// ahead: a key that passed 30 minutes ago by the local clock is stale. The
// server 3 hours behind: a key that passed 2 hours ago by the local clock
// has not passed yet, and stays.
func TestCleanupServerClock(t *testing.T) {
	local := time.Now()
	for _, tc := range []struct {
		name   string
		server time.Duration // the server's clock, from the local one
		passed time.Duration // the key's timestamp, before the local clock
		stale  bool
	}{
		{"server-ahead", 3 * time.Hour, 30 * time.Minute, true},
		{"server-behind", -3 * time.Hour, 2 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			mr.SetTime(local.Add(tc.server))
			c := redistest.GoRedis(t, mr.Addr())
			mr.Set("lock.x", unix(local.Add(-tc.passed)))
			p, err := cleanup.Find(context.Background(), c, "lock.", time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(p.Candidates) == 1; got != tc.stale {
				t.Errorf("stale = %v (candidates %+v), want %v", got, p.Candidates, tc.stale)
			}
		})
	}
}

// TestFindFails: a listing that fails plans nothing, with an error that
// says so; a margin that is not positive is refused.
func TestFindFails(t *testing.T) {
	c, _ := oneServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := cleanup.Find(ctx, c, "lock.", time.Hour, nil); err == nil || len(p.Candidates) != 0 {
		t.Errorf("Find with a cancelled context: %+v, %v; want an error", p, err)
	}
	if _, err := cleanup.Find(context.Background(), c, "lock.", 0, nil); err == nil || !strings.Contains(err.Error(), "margin") {
		t.Errorf("Find with a zero margin: %v; want an error naming the margin", err)
	}
}

// snapshot returns every key of c's server with its type and, for
// strings, its value.
func snapshot(t *testing.T, c redisclient.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	v, err := c.Do(ctx, "KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := v.([]any)
	m := map[string]string{}
	for _, k := range keys {
		key, _ := k.(string)
		val, ok, err := c.Get(ctx, key)
		switch {
		case redisclient.IsWrongType(err):
			m[key] = "(not a string)"
		case err != nil:
			t.Fatal(err)
		case ok:
			m[key] = val
		}
	}
	return m
}
