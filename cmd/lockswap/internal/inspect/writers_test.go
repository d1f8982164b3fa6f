package inspect_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/migrate"
	"github.com/lockswap/lockswap/singleredis"
)

// TestWriters: on one server, inspect tells the live legacy locks of old
// clients from those of lockswap clients in the dual phase and in the
// target phase with the safety net, whose legacy Locker sets a Redis
// expiry (redis_expiry=true), by that expiry. The old clients are shaped
// as npm redis-lock@0.0.9 takes a lock (SETNX of the expiry in Unix
// milliseconds, no Redis expiry), and one takes over an expired lock
// with GETSET, which removes the expiry lockswap had set.
func TestWriters(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redistest.GoRedis(t, srv.Addr())
	ctx := context.Background()
	now, err := c.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	if _, err := c.SetNX(ctx, "lock.old", ms(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetNX(ctx, "lock.old-dead", ms(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "SET", "lock.taken-over", ms(-time.Second), "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.GetSet(ctx, "lock.taken-over", ms(time.Minute)); err != nil {
		t.Fatal(err)
	}
	newLegacy := func() lockswap.Locker {
		l, err := legacysetnx.New(c, legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds, SetRedisExpiry: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	target, err := singleredis.New(c, singleredis.Options{Prefix: "locks:"})
	if err != nil {
		t.Fatal(err)
	}
	dual, err := migrate.New(migrate.Options{Phase: migrate.PhaseDual, Legacy: newLegacy(), Target: target})
	if err != nil {
		t.Fatal(err)
	}
	defer dual.Close()
	withNet, err := migrate.New(migrate.Options{Phase: migrate.PhaseTarget, LegacyNet: true, Legacy: newLegacy(), Target: target})
	if err != nil {
		t.Fatal(err)
	}
	defer withNet.Close()
	for lk, name := range map[lockswap.Locker]string{dual: "dual", withNet: "net"} {
		if _, err := lk.TryAcquire(ctx, name, lockswap.WithTTL(time.Minute)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	l, err := inspect.Scan(ctx, c, inspect.Query{Prefix: "lock.", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]inspect.Entry{}
	for _, e := range l.Entries {
		got[e.Key] = e
	}
	for key, want := range map[string]inspect.Writer{
		"lock.old": inspect.WriterOld, "lock.old-dead": inspect.WriterOld, "lock.taken-over": inspect.WriterOld,
		"lock.dual": inspect.WriterLockswap, "lock.net": inspect.WriterLockswap,
	} {
		if e := got[key]; e.Kind != inspect.KindLegacy || e.Unit != inspect.UnitMilliseconds || e.Writer != want {
			t.Errorf("%s = %+v, want a legacy timestamp in ms written by %s", key, e, want)
		}
	}
	s := inspect.Summarize(l.Entries)
	if s.LiveOld != 2 || s.LiveLockswap != 2 {
		t.Errorf("summary %+v: want 2 live locks of old clients (lock.old, lock.taken-over) and 2 of lockswap", s)
	}
	var buf bytes.Buffer
	if err := inspect.Print(&buf, l, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WRITER", "old client", "lockswap", "live legacy locks: 2 by old clients"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the listing lacks %q:\n%s", want, buf.String())
		}
	}
}
