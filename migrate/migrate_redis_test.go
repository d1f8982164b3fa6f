package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/migrate"
	"github.com/lockswap/lockswap/singleredis"
)

// oldClient is an old service's lock code, written from the documented
// SETNX pattern (redis.io SETNX, "Locking with SETNX"): the value is the
// Unix time (seconds) at which the lock expires; an expired lock is taken
// over with GETSET; the holder DELs the key only if its timeout has not
// passed.
type oldClient struct {
	rdb     *goredis.Client
	timeout int64 // seconds
}

func (c oldClient) acquire(ctx context.Context, key string) (int64, bool) {
	now := time.Now().Unix()
	expiry := now + c.timeout + 1
	if ok, err := c.rdb.SetNX(ctx, key, expiry, 0).Result(); err == nil && ok {
		return expiry, true
	}
	cur, err := c.rdb.Get(ctx, key).Int64()
	if err != nil || cur >= now {
		return 0, false // held (or vanished: try again later)
	}
	old, err := c.rdb.GetSet(ctx, key, expiry).Result()
	if err != nil {
		return 0, false
	}
	if o, _ := strconv.ParseInt(old, 10, 64); o < now {
		return expiry, true
	}
	return 0, false // another client won the takeover
}

func (c oldClient) release(ctx context.Context, key string, expiry int64) {
	if time.Now().Unix() < expiry {
		c.rdb.Del(ctx, key)
	}
}

// contend runs the old clients and the lockswap Lockers against each other
// for d from several goroutines, and returns the overlap detector's stats.
func contend(t *testing.T, d time.Duration, old *oldClient, oldKey string, lockers []lockswap.Locker, key string) fenced.Stats {
	t.Helper()
	ctx := context.Background()
	var res fenced.Resource
	var wg sync.WaitGroup
	var lockErr atomic.Pointer[error]
	end := time.Now().Add(d)
	hold := func(holder string) {
		res.Enter(holder)
		time.Sleep(200 * time.Microsecond) // a little work inside the critical section
		res.Exit()
	}
	if old != nil {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for time.Now().Before(end) {
					if exp, ok := old.acquire(ctx, oldKey); ok {
						hold(fmt.Sprintf("old%d", g))
						old.release(ctx, oldKey, exp)
					}
					time.Sleep(time.Millisecond)
				}
			}(g)
		}
	}
	for i, lk := range lockers {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func(lk lockswap.Locker, holder string) {
				defer wg.Done()
				for time.Now().Before(end) {
					l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(2*time.Second))
					if errors.Is(err, lockswap.ErrHeld) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						lockErr.Store(&err)
						return
					}
					hold(holder)
					if err := l.Release(ctx); err != nil {
						lockErr.Store(&err)
						return
					}
				}
			}(lk, fmt.Sprintf("locker%d/%d", i, g))
		}
	}
	wg.Wait()
	if e := lockErr.Load(); e != nil {
		t.Fatalf("a lockswap client failed: %v", *e)
	}
	return res.Stats()
}

type rig struct {
	addr string
	old  *oldClient
}

func newRig(t *testing.T) rig {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	return rig{addr: srv.Addr(), old: &oldClient{rdb: redistest.GoRedisClient(t, srv.Addr()), timeout: 2}}
}

func (r rig) legacy(t *testing.T) *legacysetnx.Locker {
	lk, err := legacysetnx.New(redistest.GoRedis(t, r.addr), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

func (r rig) target(t *testing.T) *singleredis.Locker {
	lk, err := singleredis.New(redistest.Redigo(t, r.addr), singleredis.Options{Prefix: "locks:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

func (r rig) migrator(t *testing.T, phase migrate.Phase, net bool, onNet func(string)) *migrate.Locker {
	return mustNew(t, migrate.Options{Phase: phase, Legacy: r.legacy(t), Target: r.target(t), LegacyNet: net, OnLegacyNet: onNet})
}

const contendFor = 700 * time.Millisecond

func checkNoOverlap(t *testing.T, st fenced.Stats, who string) {
	t.Helper()
	if st.Overlaps != 0 {
		t.Errorf("%s: %d of %d critical sections overlapped", who, st.Overlaps, st.Entries)
	}
	if st.Entries < 10 {
		t.Errorf("%s: only %d critical sections in %v: the clients did not really contend", who, st.Entries, contendFor)
	}
}

func TestOldClientVersusDual(t *testing.T) {
	r := newRig(t)
	dual := r.migrator(t, migrate.PhaseDual, false, nil)
	st := contend(t, contendFor, r.old, "lock.job", []lockswap.Locker{dual}, "job")
	checkNoOverlap(t, st, "old client vs dual")
}

func TestDualVersusTarget(t *testing.T) {
	r := newRig(t)
	dual := r.migrator(t, migrate.PhaseDual, false, nil)
	target := r.migrator(t, migrate.PhaseTarget, false, nil)
	st := contend(t, contendFor, nil, "", []lockswap.Locker{dual, target}, "job")
	checkNoOverlap(t, st, "dual vs target")
}

func TestForgottenOldClientVersusTargetWithNet(t *testing.T) {
	r := newRig(t)
	var fired atomic.Int64
	target := r.migrator(t, migrate.PhaseTarget, true, func(string) { fired.Add(1) })
	st := contend(t, contendFor, r.old, "lock.job", []lockswap.Locker{target}, "job")
	checkNoOverlap(t, st, "forgotten old client vs target with the safety net")
	if fired.Load() == 0 {
		t.Error("the safety net never reported the old client")
	}
}

// TestUnsafeJumpOverlaps shows why the runbook goes through dual: an old
// client and a target-only client without the safety net take different
// keys and both get in.
func TestUnsafeJumpOverlaps(t *testing.T) {
	r := newRig(t)
	target := r.migrator(t, migrate.PhaseTarget, false, nil)
	st := contend(t, contendFor, r.old, "lock.job", []lockswap.Locker{target}, "job")
	if st.Overlaps == 0 {
		t.Fatalf("old client and target-only client never overlapped in %d critical sections; the demonstration failed", st.Entries)
	}
}

func TestSafetyNetKeepsOutageDistinct(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	legacySrv := testserver.RedisT(t, testserver.RedisOptions{})
	legacy, _ := legacysetnx.New(redistest.GoRedis(t, legacySrv.Addr()), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
	target, _ := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	lk := mustNew(t, migrate.Options{Phase: migrate.PhaseTarget, Legacy: legacy, Target: target, LegacyNet: true})
	legacySrv.Kill()
	_, err := lk.TryAcquire(context.Background(), "job")
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("legacy Redis down, safety net on: err = %v, want ErrUnavailable and not ErrHeld", err)
	}
	// Nothing was left behind on the target.
	l, err := target.TryAcquire(context.Background(), "job")
	if err != nil {
		t.Fatalf("target key left behind: %v", err)
	}
	l.Release(context.Background())
}

func TestSameKeyRefused(t *testing.T) {
	r := newRig(t)
	legacy := r.legacy(t)
	target, _ := singleredis.New(redistest.GoRedis(t, r.addr), singleredis.Options{Prefix: "lock."})
	_, err := migrate.New(migrate.Options{Phase: migrate.PhaseDual, Legacy: legacy, Target: target})
	if !errors.Is(err, migrate.ErrSameKey) || !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("legacy and target on the same Redis key: err = %v, want ErrSameKey", err)
	}
	_, err = migrate.New(migrate.Options{Phase: migrate.PhaseDual, Legacy: legacy, Target: target,
		LegacyKey: func(k string) string { return "legacy-" + k }})
	if err != nil {
		t.Fatalf("distinct keys through LegacyKey: %v", err)
	}
}

// TestConformanceOnRedis: the migration Locker over legacysetnx and
// singleredis on redis-server passes the suite in every phase.
func TestConformanceOnRedis(t *testing.T) {
	r := newRig(t)
	for _, phase := range []migrate.Phase{migrate.PhaseLegacy, migrate.PhaseDual, migrate.PhaseTarget} {
		t.Run(phase.String(), func(t *testing.T) {
			conformance.Run(t, conformance.Harness{
				NewLocker: func(t *testing.T) lockswap.Locker { return r.migrator(t, phase, phase == migrate.PhaseTarget, nil) },
				TTL:       1500 * time.Millisecond, // legacy timestamps are whole seconds
			})
		})
	}
}
