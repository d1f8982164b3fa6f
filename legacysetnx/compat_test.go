package legacysetnx_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// oldClient is an independent legacy client, written from the Redis SETNX
// documentation with raw go-redis commands and nothing of lockswap:
//
//	SETNX lock.foo <now + timeout + 1>; on 0, GET: if the timestamp is not
//	less than now, sleep and retry; else GETSET lock.foo <now + timeout + 1>
//	and hold the lock only if the old value GETSET returned is itself
//	expired. Release: DEL, after checking that the lock has not expired.
type oldClient struct {
	rdb     *goredis.Client
	prefix  string
	ms      bool
	timeout int64 // in the unit
}

func (o *oldClient) now() int64 {
	if o.ms {
		return time.Now().UnixMilli()
	}
	return time.Now().Unix()
}

func expiredAt(v string, now int64) bool {
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n < now
}

// acquire returns the timestamp it wrote, or false when ctx ended first.
func (o *oldClient) acquire(ctx context.Context, key string) (int64, bool, error) {
	k := o.prefix + key
	for ctx.Err() == nil {
		now := o.now()
		exp := now + o.timeout + 1
		ok, err := o.rdb.SetNX(ctx, k, exp, 0).Result()
		if err != nil {
			return 0, false, ctxOr(ctx, err)
		}
		if ok {
			return exp, true, nil
		}
		v, err := o.rdb.Get(ctx, k).Result()
		if errors.Is(err, goredis.Nil) {
			continue // released meanwhile: SETNX again
		}
		if err != nil {
			return 0, false, ctxOr(ctx, err)
		}
		if expiredAt(v, now) {
			old, err := o.rdb.GetSet(ctx, k, exp).Result()
			if errors.Is(err, goredis.Nil) || (err == nil && expiredAt(old, now)) {
				return exp, true, nil
			}
			if err != nil {
				return 0, false, ctxOr(ctx, err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1+rand.IntN(5)) * time.Millisecond):
		}
	}
	return 0, false, nil
}

// ctxOr drops an error caused by the end of the run: a command cut by the
// context's deadline can fail (i/o timeout) a moment before ctx.Err() is set.
func ctxOr(ctx context.Context, err error) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(100 * time.Millisecond):
		return err
	}
}

func (o *oldClient) release(ctx context.Context, key string, exp int64) error {
	if o.now() >= exp {
		return nil // expired: someone may hold it now, do not DEL
	}
	return o.rdb.Del(ctx, o.prefix+key).Err()
}

// TestContendWithOldClients runs old clients and lockswap Lockers of the
// same unit (seconds, and milliseconds with the client clock and with
// ServerTime) on the same keys, from several goroutines, for a bounded time
// on redis-server.
// Some holders of both kinds "crash" (never release) so that expired locks
// are taken over by the GETSET rule and by lockswap's script. With clocks
// that agree, the overlap detector must find no two holders at once.
func TestContendWithOldClients(t *testing.T) {
	type variant struct {
		name        string
		opts        legacysetnx.Options
		oldTimeout  int64
		ttl         time.Duration
		run         time.Duration
		maxAbandons int64
	}
	variants := []variant{
		{"seconds", legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."}, 1, time.Second, 5 * time.Second, 1}, // an abandoned lock blocks its key ~2s: leave time for both sides
		{"millis", legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds}, 150, 150 * time.Millisecond, 2 * time.Second, 8},
		{"millis-servertime", legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds, ServerTime: true}, 150, 150 * time.Millisecond, 2 * time.Second, 8},
	}
	for _, c := range redistest.Clients {
		for _, v := range variants {
			t.Run(c.Name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				srv := testserver.RedisT(t, testserver.RedisOptions{})
				ctx, cancel := context.WithTimeout(context.Background(), v.run)
				defer cancel()
				keys := []string{"foo", "bar"}
				res := map[string]*fenced.Resource{"foo": {}, "bar": {}}
				var (
					abandons, takeovers, lost atomic.Int64
					pending                   sync.Map // key -> abandoned, not yet taken over
					oldEntries, newEntries    atomic.Int64
					wg                        sync.WaitGroup
				)
				enter := func(key, who string) {
					res[key].Enter(who)
					if _, was := pending.LoadAndDelete(key); was {
						takeovers.Add(1)
					}
				}
				// critical returns true when the holder should "crash"
				// (leave the lock unreleased) after the critical section.
				critical := func(key string) bool {
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
					res[key].Exit()
					if rand.IntN(20) == 0 && abandons.Add(1) <= v.maxAbandons {
						pending.Store(key, true)
						return true
					}
					return false
				}
				errs := make(chan error, 16)
				for i := 0; i < 4; i++ {
					oc := &oldClient{rdb: redistest.GoRedisClient(t, srv.Addr()), prefix: "lock.", ms: v.opts.Unit == legacysetnx.Milliseconds, timeout: v.oldTimeout}
					wg.Add(1)
					go func(who string) {
						defer wg.Done()
						for ctx.Err() == nil {
							key := keys[rand.IntN(len(keys))]
							exp, ok, err := oc.acquire(ctx, key)
							if err != nil {
								errs <- fmt.Errorf("%s: %w", who, err)
								return
							}
							if !ok {
								return
							}
							oldEntries.Add(1)
							enter(key, who)
							if critical(key) {
								continue
							}
							if err := oc.release(context.Background(), key, exp); err != nil {
								errs <- fmt.Errorf("%s: release: %w", who, err)
								return
							}
						}
					}(fmt.Sprintf("old%d", i))
				}
				for i := 0; i < 2; i++ {
					lk := newLocker(t, c.New, srv.Addr(), v.opts)
					for g := 0; g < 2; g++ {
						wg.Add(1)
						go func(who string) {
							defer wg.Done()
							for ctx.Err() == nil {
								key := keys[rand.IntN(len(keys))]
								l, err := lk.Acquire(ctx, key, lockswap.WithTTL(v.ttl),
									lockswap.WithRetry(lockswap.JitterRetry(time.Millisecond, 5*time.Millisecond)))
								if err != nil {
									if ctx.Err() == nil {
										errs <- fmt.Errorf("%s: Acquire: %w", who, err)
									}
									return
								}
								newEntries.Add(1)
								enter(key, who)
								if critical(key) {
									continue
								}
								if err := l.Release(context.Background()); errors.Is(err, lockswap.ErrLost) {
									lost.Add(1) // an old client's losing GETSET overwrote our timestamp
								} else if err != nil {
									errs <- fmt.Errorf("%s: Release: %w", who, err)
									return
								}
							}
						}(fmt.Sprintf("lockswap%d/%d", i, g))
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				for _, key := range keys {
					st := res[key].Stats()
					if st.Overlaps != 0 {
						t.Errorf("key %s: %d of %d critical sections overlapped another holder (old clients and lockswap must exclude each other)", key, st.Overlaps, st.Entries)
					}
				}
				t.Logf("old entries %d, lockswap entries %d, abandoned %d, taken over %d, lockswap releases overwritten by a losing GETSET %d",
					oldEntries.Load(), newEntries.Load(), min(abandons.Load(), v.maxAbandons), takeovers.Load(), lost.Load())
				if oldEntries.Load() == 0 || newEntries.Load() == 0 {
					t.Errorf("one side never got the lock (old %d, lockswap %d): the test did not contend", oldEntries.Load(), newEntries.Load())
				}
				if takeovers.Load() == 0 {
					t.Errorf("no abandoned lock was taken over: the takeover paths were not exercised")
				}
			})
		}
	}
}

// TestUnitMismatchRefused: an old client in one unit holds a live lock and
// lockswap Lockers configured with the other unit try to take it from
// several goroutines at once. Each Acquire fails at once with ErrInvalid
// naming the unit the value is plainly written in; none enters the
// critical section and the old client's value is left alone. The last part
// shows why the unit has no default: lockswap cannot stop an old client in
// milliseconds from reading a lock written in seconds as expired in 1970
// and taking it over while it is held.
func TestUnitMismatchRefused(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		for _, oldMs := range []bool{false, true} {
			oldUnit, ours := legacysetnx.Seconds, legacysetnx.Milliseconds
			timeout := int64(30)
			if oldMs {
				oldUnit, ours, timeout = legacysetnx.Milliseconds, legacysetnx.Seconds, 30_000
			}
			t.Run(c.Name+"/old-"+oldUnit.String()+"/lockswap-"+ours.String(), func(t *testing.T) {
				ctx := ctxT(t)
				rdb := redistest.GoRedisClient(t, srv.Addr())
				key := "mismatch-" + c.Name + "-" + oldUnit.String()
				oc := &oldClient{rdb: rdb, prefix: "lock.", ms: oldMs, timeout: timeout}
				exp, ok, err := oc.acquire(ctx, key)
				if err != nil || !ok {
					t.Fatalf("old client: %v, %v", ok, err)
				}
				var res fenced.Resource
				res.Enter("old")
				lk := newLocker(t, c.New, srv.Addr(), legacysetnx.Options{Prefix: "lock.", Unit: ours})
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for g := 0; g < 8; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						actx, cancel := context.WithTimeout(ctx, 10*time.Second)
						defer cancel()
						l, err := lk.Acquire(actx, key, lockswap.WithTTL(5*time.Second), lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
						if err == nil {
							res.Enter("lockswap")
							res.Exit()
							l.Release(ctx)
						}
						if actx.Err() != nil {
							err = fmt.Errorf("Acquire waited until its context ended: %w", err)
						}
						errs <- err
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "plainly one in "+map[bool]string{false: "seconds", true: "milliseconds"}[oldMs]) {
						t.Errorf("lockswap in %v against a live %v lock: %v, want ErrInvalid at once naming the other unit", ours, oldUnit, err)
					}
				}
				if st := res.Stats(); st.Overlaps != 0 {
					t.Errorf("%d overlaps: a lock in the other unit was taken over", st.Overlaps)
				}
				if v := rdb.Get(ctx, "lock."+key).Val(); v != strconv.FormatInt(exp, 10) {
					t.Errorf("the old client's lock was changed to %q", v)
				}
				res.Exit()
				if err := oc.release(ctx, key, exp); err != nil {
					t.Fatal(err)
				}
				if n := rdb.Exists(ctx, "lock."+key).Val(); n != 0 {
					t.Errorf("the old client's release left the key")
				}
			})
		}
		t.Run(c.Name+"/old-ms-misreads-seconds", func(t *testing.T) {
			ctx := ctxT(t)
			rdb := redistest.GoRedisClient(t, srv.Addr())
			key := "misread-" + c.Name
			lk := newLocker(t, c.New, srv.Addr(), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
			l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var res fenced.Resource
			res.Enter("lockswap-seconds")
			oc := &oldClient{rdb: rdb, prefix: "lock.", ms: true, timeout: 30_000}
			octx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			exp, ok, err := oc.acquire(octx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatal("the old millisecond client did not take the seconds lock: the hazard that makes the unit required did not show")
			}
			res.Enter("old-ms")
			if st := res.Stats(); st.Overlaps != 1 {
				t.Errorf("overlaps = %d, want the two holders counted at once", st.Overlaps)
			}
			t.Logf("an old client in milliseconds read lockswap's seconds timestamp %s as expired and took the lock (wrote %d): why unit= has no default", stamp(t, l).Value(), exp)
			if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("Release after the takeover: %v, want ErrLost", err)
			}
			res.Exit()
			res.Exit()
			oc.release(ctx, key, exp)
		})
	}
}
