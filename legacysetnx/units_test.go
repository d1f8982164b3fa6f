package legacysetnx_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// onBothServers runs f on miniredis and on a redis-server, with each client
// library; raw is a go-redis client on the same server for setting up and
// checking values as an outsider.
func onBothServers(t *testing.T, f func(t *testing.T, addr string, newClient redistest.NewClient, raw *goredis.Client)) {
	for _, server := range []string{"miniredis", "redis-server"} {
		t.Run(server, func(t *testing.T) {
			var addr string
			if server == "miniredis" {
				addr = miniredis.RunT(t).Addr()
			} else {
				addr = testserver.RedisT(t, testserver.RedisOptions{}).Addr()
			}
			raw := redistest.GoRedisClient(t, addr)
			for _, c := range redistest.Clients {
				t.Run(c.Name, func(t *testing.T) {
					if err := raw.FlushAll(context.Background()).Err(); err != nil {
						t.Fatal(err)
					}
					f(t, addr, c.New, raw)
				})
			}
		})
	}
}

// TestUnitRequired: there is no default unit. The zero Unit and an empty
// unit= are refused with ErrInvalid, and the message names both choices and
// how to find out which the old clients write.
func TestUnitRequired(t *testing.T) {
	mr := miniredis.RunT(t)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Fatalf("%s: err = %v, want ErrInvalid", what, err)
		}
		for _, want := range []string{"legacysetnx", "unit=s", "unit=ms", "seconds", "milliseconds", "lockswap inspect", "10 digits", "13 digits"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: message lacks %q: %v", what, want, err)
			}
		}
	}
	_, err := legacysetnx.New(redistest.GoRedis(t, mr.Addr()), legacysetnx.Options{Prefix: "lock."})
	check("New without Unit", err)
	_, err = legacysetnx.ParseUnit("")
	check(`ParseUnit("")`, err)
	_, err = legacysetnx.ParseUnit("  ")
	check(`ParseUnit("  ")`, err)
	if err := legacysetnx.Unit(0).ValidateTTL(time.Second); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Unit(0).ValidateTTL = %v, want ErrInvalid", err)
	}
	if got := legacysetnx.Unit(0).String(); got != "unset" {
		t.Errorf("Unit(0).String() = %q", got)
	}
	if len(mr.Keys()) != 0 {
		t.Errorf("keys written: %v", mr.Keys())
	}
}

// TestUnitOf: the unit a stored value is plainly written in.
func TestUnitOf(t *testing.T) {
	for v, want := range map[string]legacysetnx.Unit{
		"1700000000": legacysetnx.Seconds, "1700000000.25": legacysetnx.Seconds, "99999999999": legacysetnx.Seconds,
		"1700000000000": legacysetnx.Milliseconds, "100000000000": legacysetnx.Milliseconds, "99999999999999": legacysetnx.Milliseconds,
		"42": 0, "999999999": 0, "100000000000000": 0, "-1700000000": 0, "hello": 0, "": 0, "1e10": 0, " 1700000000": 0,
		"99999999999999999999999999999999": 0,
	} {
		u, ok := legacysetnx.UnitOf(v)
		if ok != (want != 0) || u != want {
			t.Errorf("UnitOf(%q) = %v, %v; want %v", v, u, ok, want)
		}
	}
}

// TestTTLRange: every path refuses a TTL outside the Locker's range with
// ErrInvalid before anything is written, and a TTL at either end works.
// In seconds the range starts at one second: a shorter TTL cannot be
// expressed by the stored timestamp.
func TestTTLRange(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	for _, tc := range []struct {
		unit     legacysetnx.Unit
		min      time.Duration
		tooShort []time.Duration
	}{
		{legacysetnx.Seconds, time.Second, []time.Duration{time.Second - 1, 999 * time.Millisecond, 300 * time.Millisecond, lockswap.MinTTL, time.Millisecond}},
		{legacysetnx.Milliseconds, lockswap.MinTTL, []time.Duration{lockswap.MinTTL - 1, time.Millisecond, time.Microsecond}},
	} {
		t.Run(tc.unit.String(), func(t *testing.T) {
			mr.FlushAll()
			lk := newLocker(t, redistest.GoRedis, mr.Addr(), legacysetnx.Options{Prefix: "lock.", Unit: tc.unit})
			min, max := lk.TTLRange()
			if min != tc.min || max != lockswap.MaxTTL {
				t.Fatalf("TTLRange() = %v, %v; want %v, %v", min, max, tc.min, lockswap.MaxTTL)
			}
			if umin, umax := tc.unit.TTLRange(); umin != min || umax != max {
				t.Errorf("Unit.TTLRange() = %v, %v; Locker.TTLRange() = %v, %v", umin, umax, min, max)
			}
			if min-lockstate.Drift(min) <= 0 {
				t.Errorf("at the minimum %v the drift allowance %v leaves no validity", min, lockstate.Drift(min))
			}
			bad := append(append([]time.Duration{}, tc.tooShort...), 0, -time.Second, lockswap.MaxTTL+1, lockswap.MaxTTL+time.Hour, math.MaxInt64)
			for _, ttl := range bad {
				if err := tc.unit.ValidateTTL(ttl); !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("Unit.ValidateTTL(%v) = %v, want ErrInvalid", ttl, err)
				}
				_, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(ttl))
				if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "legacysetnx") {
					t.Errorf("TryAcquire ttl %v: err = %v, want ErrInvalid", ttl, err)
				}
				_, err = lk.Acquire(ctx, "k", lockswap.WithTTL(ttl))
				if !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("Acquire ttl %v: err = %v, want ErrInvalid", ttl, err)
				}
				if mr.Exists("lock.k") {
					t.Fatalf("ttl %v: a refused acquisition wrote lock.k = %q", ttl, must(mr.Get("lock.k")))
				}
			}
			// Both ends of the range work, and the lock is valid on return.
			// At the minimum (8 ms of validity in milliseconds) a loaded
			// machine may use it all up in the request: the kit then gives
			// the lock back and fails the attempt as unavailable.
			for _, ttl := range []time.Duration{min, max} {
				l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(ttl))
				if ttl == min && errors.Is(err, lockswap.ErrUnavailable) && strings.Contains(err.Error(), "no validity") {
					t.Logf("TryAcquire ttl %v on this loaded machine: %v", ttl, err)
					// The kit gives the lock back in the background: the
					// next acquisition would find it held until then.
					queuetest.WaitUntil(t, "the given-back lock.k was deleted", func() bool { return !mr.Exists("lock.k") })
					continue
				}
				if err != nil {
					t.Fatalf("TryAcquire ttl %v: %v", ttl, err)
				}
				if !time.Now().Before(l.Deadline()) {
					t.Errorf("ttl %v: Deadline %v already passed on return", ttl, l.Deadline())
				}
				if u, ok := legacysetnx.UnitOf(must(mr.Get("lock.k"))); !ok || u != tc.unit {
					t.Errorf("ttl %v: stored %q is not a timestamp in %v", ttl, must(mr.Get("lock.k")), tc.unit)
				}
				// Extend refuses out-of-range TTLs and leaves the value.
				before := must(mr.Get("lock.k"))
				for _, bttl := range bad {
					if err := l.Extend(ctx, bttl); !errors.Is(err, lockswap.ErrInvalid) {
						t.Errorf("Extend ttl %v: err = %v, want ErrInvalid", bttl, err)
					}
				}
				if after := must(mr.Get("lock.k")); after != before {
					t.Errorf("refused Extends changed lock.k from %s to %s", before, after)
				}
				if err := l.Extend(ctx, min); err != nil && (ttl == max || !errors.Is(err, lockswap.ErrLost)) {
					// A lock taken with the minimum may have run out by now
					// (ErrLost); one taken with the maximum may not.
					t.Errorf("Extend to the minimum %v of a lock taken with %v: %v", min, ttl, err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func must(s string, err error) string {
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return s
}

// TestBadValues: a value under the key that is not a timestamp in the
// Locker's unit (garbage, negative, overflowing, too small, in the other
// unit, or another Redis type) fails Acquire at once with ErrInvalid (it is
// not retried until the context ends), with a message that names
// legacysetnx, the key (cut for a long one) and what to fix; nothing is
// changed on the server.
func TestBadValues(t *testing.T) {
	now := time.Now()
	secLive := strconv.FormatInt(now.Unix()+60, 10)
	msLive := strconv.FormatInt(now.UnixMilli()+60_000, 10)
	long := strings.Repeat("x", 1000)
	type tc struct {
		name  string
		unit  legacysetnx.Unit
		key   string
		set   func(ctx context.Context, rdb *goredis.Client, k string) error
		wants []string // in the message, besides legacysetnx and the key
	}
	str := func(v string) func(context.Context, *goredis.Client, string) error {
		return func(ctx context.Context, rdb *goredis.Client, k string) error { return rdb.Set(ctx, k, v, 0).Err() }
	}
	var cases []tc
	for _, u := range []legacysetnx.Unit{legacysetnx.Seconds, legacysetnx.Milliseconds} {
		cases = append(cases,
			tc{"garbage", u, "k", str("hello world"), []string{"not a lock timestamp", "other data"}},
			tc{"empty", u, "k", str(""), []string{"not a lock timestamp"}},
			tc{"two dots", u, "k", str("12.5.1"), []string{"not a lock timestamp"}},
			tc{"negative", u, "k", str("-" + secLive), []string{"negative", "broken timestamp"}},
			tc{"too small", u, "k", str("42"), []string{"too small", "not a Unix timestamp in " + map[legacysetnx.Unit]string{legacysetnx.Seconds: "seconds", legacysetnx.Milliseconds: "milliseconds"}[u], "broken timestamp"}},
			tc{"overflowing", u, "k", str("99999999999999999999999999999"), []string{"overflowing", "broken timestamp"}},
			tc{"exponent", u, "k", str("1e400"), []string{"not a lock timestamp"}},
			tc{"long garbage", u, "k", str(strings.Repeat("z", 5000)), []string{"not a lock timestamp"}},
			tc{"long key", u, long, str("hello"), []string{"(1005 bytes)"}},
			tc{"hash", u, "k", func(ctx context.Context, rdb *goredis.Client, k string) error {
				return rdb.HSet(ctx, k, "f", "v").Err()
			}, []string{"another Redis type"}},
			tc{"list", u, "k", func(ctx context.Context, rdb *goredis.Client, k string) error {
				return rdb.RPush(ctx, k, secLive).Err()
			}, []string{"another Redis type"}},
			tc{"set", u, "k", func(ctx context.Context, rdb *goredis.Client, k string) error { return rdb.SAdd(ctx, k, secLive).Err() }, []string{"another Redis type"}},
		)
	}
	cases = append(cases,
		tc{"ms value, unit s", legacysetnx.Seconds, "k", str(msLive), []string{"not a Unix timestamp in seconds", "plainly one in milliseconds", "unit=ms"}},
		tc{"s value, unit ms", legacysetnx.Milliseconds, "k", str(secLive), []string{"not a Unix timestamp in milliseconds", "plainly one in seconds", "unit=s"}},
	)
	onBothServers(t, func(t *testing.T, addr string, newClient redistest.NewClient, raw *goredis.Client) {
		ctx := ctxT(t)
		lockers := map[legacysetnx.Unit]*legacysetnx.Locker{
			legacysetnx.Seconds:      newLocker(t, newClient, addr, legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds}),
			legacysetnx.Milliseconds: newLocker(t, newClient, addr, legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds}),
		}
		for _, c := range cases {
			k := "lock." + c.key
			if err := raw.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.set(ctx, raw, k); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, raw, k)
			lk := lockers[c.unit]
			checkErr := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("%s/%v %s: err = %v, want ErrInvalid", c.name, c.unit, op, err)
					return
				}
				msg := err.Error()
				for _, want := range append([]string{"legacysetnx", lockstate.QuoteKey(k)}, c.wants...) {
					if !strings.Contains(msg, want) {
						t.Errorf("%s/%v %s: message lacks %q: %.300s", c.name, c.unit, op, want, msg)
					}
				}
				if len(msg) > 1200 {
					t.Errorf("%s/%v %s: message of %d bytes: the key and value must be cut", c.name, c.unit, op, len(msg))
				}
			}
			_, err := lk.TryAcquire(ctx, c.key, lockswap.WithTTL(time.Second))
			checkErr("TryAcquire", err)
			// Acquire with a retry policy and a long context: a bad value
			// is not something to wait out.
			actx, cancel := context.WithTimeout(ctx, 20*time.Second)
			start := time.Now()
			_, err = lk.Acquire(actx, c.key, lockswap.WithTTL(time.Second), lockswap.WithRetry(lockswap.ConstantRetry(10*time.Millisecond)))
			took := time.Since(start)
			ended := actx.Err()
			cancel()
			checkErr("Acquire", err)
			if ended != nil || took > 5*time.Second {
				t.Errorf("%s/%v: Acquire returned after %v (context ended: %v): a bad value must fail at once", c.name, c.unit, took, ended)
			}
			_, _, err = lk.Peek(ctx, c.key)
			checkErr("Peek", err)
			if after := snapshot(t, raw, k); after != before {
				t.Errorf("%s/%v: the value under %.40s was changed: %.100s -> %.100s", c.name, c.unit, k, before, after)
			}
			if ttl := raw.PTTL(ctx, k).Val(); ttl >= 0 {
				t.Errorf("%s/%v: an expiry %v was set on the bad value", c.name, c.unit, ttl)
			}
		}
	})
}

// TestClosedLockOps: Release and Extend of a lock whose Locker was closed
// (and Peek on that Locker) return ErrClosed, whether the Locker owned its
// client (closed with it) or not; nothing is sent.
func TestClosedLockOps(t *testing.T) {
	onBothServers(t, func(t *testing.T, addr string, newClient redistest.NewClient, raw *goredis.Client) {
		ctx := ctxT(t)
		for _, owned := range []bool{false, true} {
			rc := newClient(t, addr)
			o := legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds}
			if owned {
				o.Closer = closerFunc(func() error { return nil })
			}
			lk, err := legacysetnx.New(rc, o)
			if err != nil {
				t.Fatal(err)
			}
			l, err := lk.TryAcquire(ctx, "c", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Close(); err != nil {
				t.Fatal(err)
			}
			if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, lockswap.ErrClosed) || !strings.Contains(err.Error(), "legacysetnx") {
				t.Errorf("owned %v: Extend after Close = %v, want ErrClosed", owned, err)
			}
			if err := l.Release(ctx); !errors.Is(err, lockswap.ErrClosed) || errors.Is(err, lockswap.ErrUnavailable) {
				t.Errorf("owned %v: Release after Close = %v, want ErrClosed", owned, err)
			}
			if _, _, err := lk.Peek(ctx, "c"); !errors.Is(err, lockswap.ErrClosed) {
				t.Errorf("owned %v: Peek after Close = %v, want ErrClosed", owned, err)
			}
			if v := raw.Get(ctx, "lock.c").Val(); v != stamp(t, l).Value() {
				t.Errorf("owned %v: lock.c = %q, want the lock left until its timestamp (%s)", owned, v, stamp(t, l).Value())
			}
			raw.Del(ctx, "lock.c")
		}
	})
}

// snapshot renders the type and content of key k (DUMP is not in
// miniredis for every type).
func snapshot(t *testing.T, rdb *goredis.Client, k string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := rdb.Type(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ {
	case "string":
		v, err = rdb.Get(ctx, k).Result()
	case "hash":
		v, err = rdb.HGetAll(ctx, k).Result()
	case "list":
		v, err = rdb.LRange(ctx, k, 0, -1).Result()
	case "set":
		v, err = rdb.SMembers(ctx, k).Result()
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %v", typ, v)
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
