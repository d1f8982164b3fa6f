package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// snapshot describes every key on the servers: name, type and value.
func snapshot(t *testing.T, raws []*goredis.Client) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i, rc := range raws {
		keys, err := rc.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(keys)
		for _, k := range keys {
			typ := rc.Type(ctx, k).Val()
			var v any
			switch typ {
			case "string":
				v = rc.Get(ctx, k).Val()
			case "hash":
				v = rc.HGetAll(ctx, k).Val()
			}
			out = append(out, fmt.Sprintf("%d %s %s %v", i, k, typ, v))
		}
	}
	return out
}

// waitGone waits, at most 5 s, until no instance has key.
func waitGone(t *testing.T, raws []*goredis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, rc := range raws {
		for rc.Exists(context.Background(), key).Val() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("key %q still on an instance after 5 s", key)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// quickly bounds a call that must fail at once: generous, since -race on a
// shared machine is slow, but far below the 20 s the context allows.
const quickly = 3 * time.Second

// TestErrorsThatRetryingCannotFix: a value retrying cannot change on so
// many instances that no majority is possible fails the attempt at once
// with ErrInvalid saying what to fix: TryAcquire, and Acquire with a long
// context and a fast retry policy (not retried); nothing on the servers
// changes. On a minority the same value only counts as a failing instance.
func TestErrorsThatRetryingCannotFix(t *testing.T) {
	type setup struct {
		addrs []string
		raws  []*goredis.Client
	}
	onMiniredis := func(t *testing.T, n int) setup {
		var s setup
		for range n {
			m := miniredis.RunT(t)
			s.addrs = append(s.addrs, m.Addr())
			s.raws = append(s.raws, redistest.GoRedisClient(t, m.Addr()))
		}
		return s
	}
	onServers := func(args ...[]string) func(t *testing.T, n int) setup {
		return func(t *testing.T, n int) setup {
			var s setup
			for i := range n {
				var o testserver.RedisOptions
				if i < len(args) {
					o.Args = args[i]
				}
				r := testserver.RedisT(t, o)
				s.addrs = append(s.addrs, r.Addr())
				s.raws = append(s.raws, redistest.GoRedisClient(t, r.Addr()))
			}
			return s
		}
	}
	noSet := []string{"--rename-command", "SET", ""}
	old := fmt.Sprintf("%d.0.test", time.Now().Add(-time.Hour).Unix()) // an epoch past its quarantine
	cases := []struct {
		name    string
		servers func(t *testing.T, n int) setup
		opts    redlock.Options
		prepare func(ctx context.Context, raws []*goredis.Client) // on instances 0 and 1 of 3
		want    string                                            // in the error
		minor   bool                                              // only instance 0: the lock is still acquired
	}{
		{name: "hash under the key (miniredis)", servers: onMiniredis, want: "holds a hash, not a lock",
			prepare: func(ctx context.Context, raws []*goredis.Client) {
				for _, rc := range raws {
					rc.HSet(ctx, "k", "field", "value")
				}
			}},
		{name: "hash under the key (redis-server)", servers: onServers(), want: "holds a hash, not a lock",
			prepare: func(ctx context.Context, raws []*goredis.Client) {
				for _, rc := range raws {
					rc.HSet(ctx, "k", "field", "value")
				}
			}},
		{name: "hash under the key on a minority", servers: onMiniredis, minor: true,
			prepare: func(ctx context.Context, raws []*goredis.Client) {
				raws[0].HSet(ctx, "k", "field", "value")
			}},
		{name: "epoch key holds garbage", servers: onServers(), opts: redlock.Options{RestartSafety: true, MaxTTL: time.Minute},
			want: "is not a lockswap epoch",
			prepare: func(ctx context.Context, raws []*goredis.Client) {
				for _, rc := range raws {
					rc.Set(ctx, redlock.EpochKey, "garbage", 0)
				}
			}},
		{name: "epoch key is a hash", servers: onServers(), opts: redlock.Options{RestartSafety: true, MaxTTL: time.Minute},
			want: "WRONGTYPE",
			prepare: func(ctx context.Context, raws []*goredis.Client) {
				for _, rc := range raws {
					rc.HSet(ctx, redlock.EpochKey, "field", "value")
				}
			}},
		{name: "SET disabled on the server", servers: onServers(noSet, noSet), want: "unknown command",
			prepare: func(context.Context, []*goredis.Client) {}},
	}
	for _, tc := range cases {
		for _, c := range redistest.Clients {
			t.Run(tc.name+"/"+c.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				s := tc.servers(t, 3)
				if tc.opts.RestartSafety {
					s.raws[2].Set(ctx, redlock.EpochKey, old, 0)
				}
				victims := s.raws[:2]
				if tc.minor {
					victims = s.raws[:1]
				}
				tc.prepare(ctx, victims)
				lk := newLocker(t, s.addrs, c.New, tc.opts)
				before := snapshot(t, s.raws)
				if tc.minor {
					l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
					if err != nil {
						t.Fatalf("with the value on 1 of 3 instances: %v, want the lock (2 of 3)", err)
					}
					if err := l.Release(ctx); err != nil {
						t.Fatalf("Release: %v", err)
					}
					if after := snapshot(t, s.raws); !slices.Equal(before, after) {
						t.Errorf("servers changed: before %v, after %v", before, after)
					}
					return
				}
				start := time.Now()
				_, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
				if !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrUnavailable) {
					t.Fatalf("TryAcquire: %v, want ErrInvalid only", err)
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "redlock") || !strings.Contains(err.Error(), `"k"`) {
					t.Errorf("TryAcquire: %q does not say %q, name redlock and the key", err, tc.want)
				}
				_, err = lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second),
					lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
				if elapsed := time.Since(start); elapsed > quickly {
					t.Errorf("TryAcquire and Acquire took %v: they must fail at once, not retry until the context ends", elapsed)
				}
				if !errors.Is(err, lockswap.ErrInvalid) || ctx.Err() != nil {
					t.Fatalf("Acquire with a 20 s context: %v, want ErrInvalid at once", err)
				}
				waitBackground(t, lk)
				if after := snapshot(t, s.raws); !slices.Equal(before, after) {
					t.Errorf("servers changed:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	}
}

// TestBadValues: drift factors that are not numbers in [0, 0.5) are
// refused by New; TTLs outside TTLRange by Acquire, TryAcquire and Extend,
// at once, with ErrInvalid, and nothing is written.
func TestBadValues(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			addrs, _ := miniredisN(t, 3)
			cs := make([]redisclient.Client, len(addrs))
			for i, a := range addrs {
				cs[i] = c.New(t, a)
			}
			for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.01, 0.5, 7} {
				if lk, err := redlock.New(cs, redlock.Options{DriftFactor: f}); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "redlock") {
					t.Errorf("New with drift factor %v: %v, %v; want ErrInvalid naming redlock", f, lk, err)
				}
			}
			for _, o := range []redlock.Options{
				{DriftFixed: lockswap.MaxTTL + 1},
				{InstanceTimeout: lockswap.MaxTTL + 1},
				{RestartSafety: true, MaxTTL: 5 * time.Millisecond}, // below any usable TTL
			} {
				if _, err := redlock.New(cs, o); !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("New(%+v): %v, want ErrInvalid", o, err)
				}
			}

			raws := make([]*goredis.Client, len(addrs))
			for i, a := range addrs {
				raws[i] = redistest.GoRedisClient(t, a)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			long := strings.Repeat("x", 1<<20)
			ranges := []struct {
				opts     redlock.Options
				min, max time.Duration
			}{
				{redlock.Options{}, lockswap.MinTTL, lockswap.MaxTTL},
				{redlock.Options{MaxTTL: time.Minute}, lockswap.MinTTL, time.Minute},
				// 0.49: TTL − 5 ms − 0.49 TTL − 2 ms ≥ TTL/4 needs 26.93 ms.
				{redlock.Options{DriftFactor: 0.49}, 27 * time.Millisecond, lockswap.MaxTTL},
				// A 100 ms timeout: 0.74 TTL ≥ 102 ms needs 137.84 ms.
				{redlock.Options{InstanceTimeout: 100 * time.Millisecond}, 138 * time.Millisecond, lockswap.MaxTTL},
			}
			for _, r := range ranges {
				lk, err := redlock.New(cs, r.opts)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Close()
				if min, max := lk.TTLRange(); min != r.min || max != r.max {
					t.Errorf("TTLRange with %+v = [%v, %v], want [%v, %v]", r.opts, min, max, r.min, r.max)
				}
				min, max := lk.TTLRange()
				// The minimum is accepted (a loaded machine may still make
				// its instance timeout an outage, or use its few
				// milliseconds of validity up in the request: the kit then
				// gives the lock back, ErrUnavailable saying the attempt
				// left no validity, as legacysetnx's TestTTLRange accepts;
				// never ErrInvalid).
				if l, err := lk.TryAcquire(ctx, "min", lockswap.WithTTL(min)); errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("TTL %v, the minimum: %v", min, err)
				} else if err == nil {
					l.Release(ctx)
				}
				// Its key may linger on an instance whose SET came in after
				// the release or the give-back (the 5 ms instance timeout),
				// until its TTL: the snapshot below must not race that
				// expiry.
				waitGone(t, raws, "min")
				held, err := lk.Acquire(ctx, "held", lockswap.WithTTL(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				before := snapshot(t, raws)
				for _, ttl := range []time.Duration{time.Millisecond, 2 * time.Millisecond, min - time.Millisecond, max + time.Millisecond} {
					for _, key := range []string{"k", long} {
						start := time.Now()
						_, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
						check(t, fmt.Sprintf("TryAcquire TTL %v", ttl), err, lockswap.ErrInvalid)
						_, err = lk.Acquire(ctx, key, lockswap.WithTTL(ttl), lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
						check(t, fmt.Sprintf("Acquire TTL %v", ttl), err, lockswap.ErrInvalid)
						if len(err.Error()) > 1000 {
							t.Errorf("error for a 1 MB key is %d bytes long; want the key cut", len(err.Error()))
						}
						if elapsed := time.Since(start); elapsed > quickly {
							t.Errorf("refusing TTL %v took %v", ttl, elapsed)
						}
					}
					check(t, fmt.Sprintf("Extend TTL %v", ttl), held.Extend(ctx, ttl), lockswap.ErrInvalid)
				}
				if after := snapshot(t, raws); !slices.Equal(before, after) {
					t.Errorf("refused calls changed the servers:\nbefore %v\nafter  %v", before, after)
				}
				held.Release(ctx)
			}
		})
	}
}

func check(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
		return
	}
	if !strings.Contains(err.Error(), "redlock") {
		t.Errorf("%s: %q does not name redlock", what, err)
	}
}

// TestAfterClose: Release and Extend after Locker.Close fail with
// ErrClosed, at once, and send nothing (the lock expires at its TTL).
func TestAfterClose(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ms := []*miniredis.Miniredis{miniredis.RunT(t), miniredis.RunT(t), miniredis.RunT(t)}
			cs := make([]redisclient.Client, len(ms))
			for i, m := range ms {
				cs[i] = c.New(t, m.Addr())
			}
			lk, err := redlock.New(cs, redlock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Close(); err != nil {
				t.Fatal(err)
			}
			check(t, "Extend after Close", l.Extend(ctx, 10*time.Second), lockswap.ErrClosed)
			check(t, "Release after Close", l.Release(ctx), lockswap.ErrClosed)
			for i, m := range ms {
				if v, _ := m.Get("k"); v != l.Token() {
					t.Errorf("instance %d holds %q after Release on a closed Locker, want our token (nothing sent)", i, v)
				}
			}
		})
	}
}

// TestReleaseOutcomeUnknown: a Release whose caller's deadline comes while
// a majority does not answer returns ErrUnavailable and goes on in the
// background: once the instances answer again, the key is removed; Close
// waits for that work (bounded) and leaves no goroutine of it.
func TestReleaseOutcomeUnknown(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			addrs, _ := realN(t, 3)
			raws := make([]*goredis.Client, len(addrs))
			for i, a := range addrs {
				raws[i] = redistest.GoRedisClient(t, a)
			}
			proxies := make([]*testserver.Proxy, 2)
			for i := range proxies {
				proxies[i] = testserver.ProxyT(t, addrs[i])
				addrs[i] = proxies[i].Addr()
			}
			lk := newLocker(t, addrs, c.New, redlock.Options{})
			ctx := ctxT(t)
			l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range proxies {
				p.SetDelay(100 * time.Millisecond) // answers after 200 ms (more on a new connection): past the caller's deadline
			}
			rctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			defer cancel()
			err = l.Release(rctx)
			if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrLost) {
				t.Fatalf("Release with a majority slower than the deadline: %v, want ErrUnavailable only", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "1 of 3 instances removed our key") || !strings.Contains(msg, "background") {
				t.Errorf("%q: want the counts (1 of 3 removed) and that the release goes on", msg)
			}
			for i, rc := range raws {
				i, rc := i, rc
				waitFor(t, fmt.Sprintf("instance %d no longer holds the key", i), func() bool { return rc.Exists(ctx, "k").Val() == 0 })
			}
			waitBackground(t, lk)
			if err := l.Release(ctx); err != nil {
				t.Errorf("second Release: %v, want nil (it does nothing)", err)
			}
		})
	}
}

// waitFor polls cond, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
