package legacysetnx_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

// TestContendWithOldClients runs old clients and lockswap Lockers on the
// same keys, from several goroutines, for a bounded time on redis-server.
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
		{"seconds", legacysetnx.Options{Prefix: "lock."}, 1, time.Second, 5 * time.Second, 1}, // an abandoned lock blocks its key ~2s: leave time for both sides
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
