package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	lsgoredis "github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/redigo"
	"github.com/lockswap/lockswap/redlock"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	mr := miniredis.RunT(t)
	a, b := redistest.GoRedis(t, mr.Addr()), redistest.Redigo(t, miniredis.RunT(t).Addr())
	var nilPool redisclient.Client = redigo.New(nil)
	db1 := goredis.NewClient(&goredis.Options{Addr: mr.Addr(), DB: 1})
	t.Cleanup(func() { db1.Close() })
	cases := []struct {
		name    string
		clients []redisclient.Client
		opts    redlock.Options
		want    string
	}{
		{"no clients", nil, redlock.Options{}, "no redis clients"},
		{"nil client", []redisclient.Client{a, nil, b}, redlock.Options{}, "client 1 of 3 is nil"},
		{"nil adapter", []redisclient.Client{a, nilPool}, redlock.Options{}, "is nil"},
		{"same client twice", []redisclient.Client{a, b, a}, redlock.Options{}, "clients 0 and 2 are the same"},
		{"same address twice", []redisclient.Client{a, redistest.GoRedis(t, mr.Addr()), b}, redlock.Options{}, "same client or server"},
		{"two databases of one server", []redisclient.Client{a, b, lsgoredis.New(db1)}, redlock.Options{}, "same client or server"},
		{"negative drift", []redisclient.Client{a}, redlock.Options{DriftFactor: -0.1}, "drift factor"},
		{"huge drift", []redisclient.Client{a}, redlock.Options{DriftFactor: 0.5}, "drift factor"},
		{"negative timeout", []redisclient.Client{a}, redlock.Options{InstanceTimeout: -time.Second}, "instance timeout"},
		{"restart safety without max TTL", []redisclient.Client{a}, redlock.Options{RestartSafety: true}, "needs MaxTTL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lk, err := redlock.New(c.clients, c.opts)
			if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, %v; want ErrInvalid mentioning %q", lk, err, c.want)
			}
		})
	}
	if len(mr.Keys()) != 0 {
		t.Errorf("rejected configurations wrote keys: %v", mr.Keys())
	}
}

func TestTTLAboveMaxTTLRejected(t *testing.T) {
	addrs, _ := miniredisN(t, 3)
	lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{MaxTTL: time.Second})
	ctx := ctxT(t)
	if _, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(2*time.Second)); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("TTL above MaxTTL: err = %v, want ErrInvalid (restart safety is computed from MaxTTL)", err)
	}
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 2*time.Second); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("Extend above MaxTTL: err = %v, want ErrInvalid", err)
	}
	l.Release(ctx)
}

func TestGuaranteesDeclared(t *testing.T) {
	for _, tc := range []struct{ n, tolerates int }{{1, 0}, {2, 0}, {3, 1}, {5, 2}, {7, 3}} {
		g := redlock.Guarantees(tc.n, false)
		if g.Backend != "redlock" || g.Nodes != tc.n || g.Tolerates != tc.tolerates || g.Fencing ||
			g.SurvivesRestart || g.Clock != lockswap.ClockBoundedDrift || !g.StaleReleaseSafe || g.Wait != lockswap.WaitPoll {
			t.Errorf("Guarantees(%d, false) = %+v", tc.n, g)
		}
		if !redlock.Guarantees(tc.n, true).SurvivesRestart {
			t.Errorf("Guarantees(%d, true) must declare SurvivesRestart", tc.n)
		}
	}
}

// TestQuorumAndValidity checks the acquisition rule on miniredis: the lock
// needs N/2+1 instances, and its deadline is start + TTL − elapsed − drift
// with the configured drift.
func TestQuorumAndValidity(t *testing.T) {
	ms := make([]*miniredis.Miniredis, 5)
	addrs := make([]string, 5)
	for i := range ms {
		ms[i] = miniredis.RunT(t)
		addrs[i] = ms[i].Addr()
	}
	ctx := ctxT(t)
	// ErrHeld only: all three holding instances must answer, a loaded
	// machine's first dials included (the TTL of 1 s allows 500 ms).
	lk := newLocker(t, addrs, redistest.Redigo, redlock.Options{DriftFactor: 0.1, DriftFixed: 50 * time.Millisecond,
		InstanceTimeout: 500 * time.Millisecond})
	if lk.Quorum() != 3 {
		t.Fatalf("Quorum() = %d for 5 instances, want 3", lk.Quorum())
	}
	// Another owner holds the key on 3 instances: no majority is possible.
	for _, m := range ms[:3] {
		m.Set("k", "someone-else")
	}
	_, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if !errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("3 of 5 held by another owner: err = %v, want ErrHeld only", err)
	}
	// The failed attempt was undone where it had succeeded.
	for i, m := range ms[3:] {
		if m.Exists("k") {
			t.Errorf("instance %d still has our key after a failed attempt: the attempt must be undone", i+3)
		}
	}
	// With 2 of 5 held elsewhere, 3 votes are a majority.
	ms[2].Del("k")
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("3 of 5 free: %v", err)
	}
	// The validity counts from the attempt's start, some time before
	// TryAcquire returned: the latest the attempt can have started is
	// now. (The time before the call is no bound: on a busy machine the
	// attempt may start later than the call by more than its requests
	// take, and the validity also loses the time they took.)
	if max := time.Now().Add(time.Second - 100*time.Millisecond - 50*time.Millisecond); l.Deadline().After(max) {
		t.Errorf("Deadline %v is past start + TTL − (TTL×0.1 + 50ms), with start at the latest now: %v", l.Deadline(), max)
	}
	for i, m := range ms[2:] {
		if v, _ := m.Get("k"); v != l.Token() {
			t.Errorf("instance %d holds %q, want our token %q (plain SET NX PX of one random value)", i+2, v, l.Token())
		}
		if ttl := m.TTL("k"); ttl <= 0 || ttl > time.Second {
			t.Errorf("instance %d: PTTL %v, want the lock TTL", i+2, ttl)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if i >= 2 && m.Exists("k") {
			t.Errorf("instance %d still has our key after Release", i)
		}
		if i < 2 && !m.Exists("k") {
			t.Errorf("Release removed another owner's key on instance %d", i)
		}
	}
}

// TestExtensionBounded checks that extensions are limited in number and in
// total hold time, and need a majority.
func TestExtensionBounded(t *testing.T) {
	ms := make([]*miniredis.Miniredis, 3)
	addrs := make([]string, 3)
	for i := range ms {
		ms[i] = miniredis.RunT(t)
		addrs[i] = ms[i].Addr()
	}
	ctx := ctxT(t)
	lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{MaxExtensions: 2})
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := l.Extend(ctx, 8*time.Second); err != nil {
			t.Fatalf("Extend #%d: %v", i+1, err)
		}
	}
	if ttl := ms[0].TTL("k"); ttl <= 5*time.Second {
		t.Errorf("PTTL after Extend(8s) = %v, want > 5s", ttl)
	}
	if err := l.Extend(ctx, 8*time.Second); !errors.Is(err, lockswap.ErrLost) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("third Extend with MaxExtensions 2: err = %v, want ErrLost naming the limit", err)
	}
	l.Release(ctx)

	hold := newLocker(t, addrs, redistest.GoRedis, redlock.Options{MaxHold: 6 * time.Second})
	l, err = hold.TryAcquire(ctx, "h", lockswap.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 8*time.Second); !errors.Is(err, lockswap.ErrLost) || !strings.Contains(err.Error(), "maximum hold") {
		t.Fatalf("Extend past MaxHold: err = %v, want ErrLost naming the maximum hold time", err)
	}
	// A majority that no longer holds our token makes Extend report loss.
	ms[0].Set("h", "other")
	ms[1].Del("h")
	if err := l.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Extend with 2 of 3 instances not holding our token: err = %v, want ErrLost", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done still open after Extend found the lock lost")
	}
}

// TestHolderPauseNoFence shows the declared weakness: a holder that pauses
// past its validity no longer has exclusion, and there is no fence with
// which a resource could reject it.
func TestHolderPauseNoFence(t *testing.T) {
	addrs, advance := miniredisN(t, 3)
	ctx := ctxT(t)
	a := newLocker(t, addrs, redistest.GoRedis, redlock.Options{})
	b := newLocker(t, addrs, redistest.Redigo, redlock.Options{})
	la, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := la.Fence(); ok {
		t.Fatal("Fence() ok = true; redlock declares no fencing")
	}
	advance(1100 * time.Millisecond) // A "pauses" past its TTL
	lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("B after A's TTL passed: %v", err)
	}
	if _, ok := lb.Fence(); ok {
		t.Fatal("B's lock has a fence")
	}
	// A's handle cannot tell on its own (its local deadline is real time,
	// not yet passed): the paused holder would act without exclusion.
	select {
	case <-la.Done():
		t.Skip("A's Done already closed; the machine was too slow to show the weakness")
	default:
	}
	if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("A's Release after B took over: %v, want ErrLost", err)
	}
	if _, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("A's stale Release disturbed B's lock: %v", err)
	}
	lb.Release(ctx)
}

// TestMinorityDown: with 2 of 5 real servers killed a lock is still
// acquired, excludes, and is released (Tolerates = 2); a lock held before
// the failure keeps excluding. Masters that forget a lock (a failover to a
// replica without it) are failover_test.go's.
func TestMinorityDown(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			addrs, srvs := realN(t, 5)
			ctx := ctxT(t)
			// ErrHeld with 2 of 5 down needs every live instance's
			// answer, first dials included: a timeout a loaded machine
			// keeps, far below the TTL.
			opts := redlock.Options{InstanceTimeout: time.Second}
			a := newLocker(t, addrs, c.New, opts)
			b := newLocker(t, addrs, c.New, opts)
			held, err := a.TryAcquire(ctx, "before", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			srvs[0].Kill()
			srvs[3].Kill()
			if _, err := b.TryAcquire(ctx, "before", lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("lock held before 2 of 5 died: another Locker got %v, want ErrHeld", err)
			}
			l, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("acquire with 2 of 5 down: %v", err)
			}
			if _, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("with 2 of 5 down another Locker got %v, want ErrHeld", err)
			}
			if err := l.Extend(ctx, 10*time.Second); err != nil {
				t.Fatalf("Extend with 2 of 5 down: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release with 2 of 5 down: %v", err)
			}
			lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("after Release with 2 of 5 down: %v", err)
			}
			lb.Release(ctx)
			held.Release(ctx)
		})
	}
}

// TestMajorityDown: with 3 of 5 down (2 killed, 1 silent behind a
// blackholing proxy) Acquire fails with the outage error, which lists each
// instance's failure, within a time set by the per-instance timeout and the
// retries, not by the TTL.
func TestMajorityDown(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			addrs, srvs := realN(t, 5)
			proxy := testserver.ProxyT(t, addrs[4])
			addrs[4] = proxy.Addr()
			ctx := ctxT(t)
			// The live instances must answer within it on a loaded
			// machine (the error counts them).
			const timeout = 300 * time.Millisecond
			lk := newLocker(t, addrs, c.New, redlock.Options{InstanceTimeout: timeout})
			// Warm the connection through the proxy, then silence it.
			if l, err := lk.Acquire(ctx, "warm", lockswap.WithTTL(5*time.Second),
				lockswap.WithRetry(lockswap.ConstantRetry(10*time.Millisecond))); err != nil {
				t.Fatal(err)
			} else {
				l.Release(ctx)
			}
			srvs[0].Kill()
			srvs[1].Kill()
			proxy.Blackhole(true)
			defer proxy.Blackhole(false)
			const attempts = 3
			ttl := 20 * time.Second
			start := time.Now()
			_, err := lk.Acquire(ctx, "k", lockswap.WithTTL(ttl),
				lockswap.WithRetry(lockswap.LimitedRetry(10*time.Millisecond, attempts)))
			elapsed := time.Since(start)
			if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("3 of 5 down: err = %v, want ErrUnavailable only", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "2 of 5 instances answered (need 3)") {
				t.Errorf("outage error %q does not say how many instances answered", msg)
			}
			for _, a := range []string{srvs[0].Addr(), srvs[1].Addr(), proxy.Addr()} {
				if !strings.Contains(msg, a) {
					t.Errorf("outage error %q does not name the failed instance %s", msg, a)
				}
			}
			// Each attempt: one timeout for the SETs, one for undoing the
			// unknown outcomes; plus the delays. Generous slack for -race.
			bound := attempts*2*timeout + attempts*10*time.Millisecond + time.Second
			if elapsed > bound {
				t.Errorf("outage reported after %v, more than %v (TTL %v): a dead instance must cost the instance timeout", elapsed, bound, ttl)
			}
		})
	}
}

// TestSlowInstance: one instance behind a delaying proxy shrinks the
// validity by its round trip; a majority that answers only after the TTL
// grants nothing.
func TestSlowInstance(t *testing.T) {
	addrs, _ := realN(t, 5)
	proxies := make([]*testserver.Proxy, 3)
	for i := range proxies {
		proxies[i] = testserver.ProxyT(t, addrs[i])
		addrs[i] = proxies[i].Addr()
	}
	ctx := ctxT(t)
	lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{InstanceTimeout: time.Second})
	const delay = 60 * time.Millisecond
	ttl := 2 * time.Second
	proxies[0].SetDelay(delay)
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// The slow instance answered after at least 2×delay: the validity is
	// at most TTL − 2×delay − drift from the attempt's start, which was
	// 2×delay before now at the latest (the time before the call is no
	// bound: on a busy machine the attempt may start later than the call
	// by more than its requests take).
	if max := time.Now().Add(ttl - 4*delay - redlockDrift(ttl)); l.Deadline().After(max) {
		t.Errorf("Deadline %v is past start + TTL − slow round trip − drift, with start at the latest now − 2×delay: %v", l.Deadline(), max)
	}
	l.Release(ctx)

	// A TTL that the instance timeout (1 s) would leave without validity
	// is refused, not tried.
	short := 200 * time.Millisecond
	if _, err = lk.TryAcquire(ctx, "slow", lockswap.WithTTL(short)); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("TTL %v with a 1 s instance timeout: err = %v, want ErrInvalid", short, err)
	}
	// A majority slower than the instance timeout: granted nothing, and
	// what the late SETs wrote is undone.
	fast := newLocker(t, addrs, redistest.GoRedis, redlock.Options{InstanceTimeout: 150 * time.Millisecond})
	for _, p := range proxies {
		p.SetDelay(150 * time.Millisecond)
	}
	_, err = fast.TryAcquire(ctx, "slow", lockswap.WithTTL(time.Second))
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a majority slower than the instance timeout: err = %v, want ErrUnavailable only", err)
	}
	for _, p := range proxies {
		p.SetDelay(0)
	}
	for i, a := range addrs {
		rc := redistest.GoRedisClient(t, a)
		queuetest.WaitUntil(t, fmt.Sprintf("instance %d no longer holds the failed attempt's key", i), func() bool {
			return rc.Exists(ctx, "slow").Val() == 0
		})
	}
}

func redlockDrift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*redlock.DefaultDriftFactor) + redlock.DefaultDriftFixed
}

// rawRedlock is an independent Redlock client written with raw go-redis
// calls: SET NX PX of one random value on every master at once, a majority
// within the validity, compare-and-delete on release.
type rawRedlock struct{ cs []*goredis.Client }

const rawRelease = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

func (r rawRedlock) lock(ctx context.Context, key, value string, ttl time.Duration) bool {
	start := time.Now()
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range r.cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := c.SetNX(ctx, key, value, ttl).Result(); ok {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n >= len(r.cs)/2+1 && time.Since(start) < ttl-ttl/100-2*time.Millisecond {
		return true
	}
	r.unlock(ctx, key, value)
	return false
}

func (r rawRedlock) unlock(ctx context.Context, key, value string) {
	for _, c := range r.cs {
		c.Eval(ctx, rawRelease, []string{key}, value)
	}
}

// TestInteroperability: lockswap and an independent Redlock client on the
// same masters and key exclude each other.
func TestInteroperability(t *testing.T) {
	addrs, _ := realN(t, 3)
	ctx := ctxT(t)
	raw := rawRedlock{}
	for _, a := range addrs {
		raw.cs = append(raw.cs, redistest.GoRedisClient(t, a))
	}
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			// Every instance must grant it: a timeout a loaded machine's
			// first dials keep.
			lk := newLocker(t, addrs, c.New, redlock.Options{Prefix: "app:", InstanceTimeout: time.Second})
			l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for i, rc := range raw.cs {
				if v := rc.Get(ctx, "app:k").Val(); v != l.Token() {
					t.Errorf("instance %d holds %q under app:k, want the token %q", i, v, l.Token())
				}
			}
			if raw.lock(ctx, "app:k", "raw-token-1", 10*time.Second) {
				t.Fatal("the independent client acquired a key lockswap holds")
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if !raw.lock(ctx, "app:k", "raw-token-2", 10*time.Second) {
				t.Fatal("the independent client could not acquire after lockswap released")
			}
			if _, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("lockswap while the independent client holds the key: %v, want ErrHeld", err)
			}
			raw.unlock(ctx, "app:k", "raw-token-2")
			l, err = lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("after the independent client released: %v", err)
			}
			l.Release(ctx)
		})
	}
}

// TestRestart: a quorum member restarted without persistence forgets the
// holder's key. Without RestartSafety a second client then acquires the
// held lock; with it, the restarted instances' votes do not count until
// MaxTTL has passed, and the second client gets the lock only after the
// first one's TTL.
func TestRestart(t *testing.T) {
	const maxTTL = 800 * time.Millisecond
	for _, safe := range []bool{false, true} {
		t.Run(fmt.Sprintf("RestartSafety=%v", safe), func(t *testing.T) {
			addrs, srvs := realN(t, 3)
			ctx := ctxT(t)
			opts := redlock.Options{RestartSafety: safe, MaxTTL: maxTTL}
			a := newLocker(t, addrs, redistest.GoRedis, opts)
			if safe {
				// Fresh instances are in quarantine for MaxTTL after first use.
				if _, err := a.TryAcquire(ctx, "warm", lockswap.WithTTL(200*time.Millisecond)); !errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(err.Error(), "restarted") {
					t.Fatalf("first use of fresh instances with RestartSafety: %v, want ErrUnavailable naming the quarantine", err)
				}
				l, err := a.Acquire(ctx, "warm", lockswap.WithTTL(200*time.Millisecond),
					lockswap.WithRetry(lockswap.ConstantRetry(20*time.Millisecond)))
				if err != nil {
					t.Fatal(err)
				}
				l.Release(ctx)
			}
			// A holds the lock on instances 0 and 1 while 2 is down. (An
			// Acquire: the warm-up got its quorum as soon as two of the
			// fresh instances voted, and 0 or 1 may still be in
			// quarantine for a few milliseconds; a CI run met it.)
			srvs[2].Kill()
			la, err := a.Acquire(ctx, "k", lockswap.WithTTL(maxTTL),
				lockswap.WithRetry(lockswap.ConstantRetry(20*time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			if err := srvs[2].Restart(); err != nil {
				t.Fatal(err)
			}
			if err := srvs[0].Restart(); err != nil { // forgets A's key
				t.Fatal(err)
			}
			b := newLocker(t, addrs, redistest.GoRedis, opts)
			lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(maxTTL))
			if !safe {
				if err != nil {
					t.Fatalf("without RestartSafety B got %v; the documented weakness is that B acquires", err)
				}
				if time.Now().Before(la.Deadline()) {
					t.Logf("as documented: B acquired while A's lock is valid until %v", la.Deadline())
				} else {
					t.Skip("A's validity ended before B acquired; the machine was too slow to show the overlap")
				}
				lb.Release(ctx)
				return
			}
			if !errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(err.Error(), "restarted") {
				t.Fatalf("with RestartSafety B got %v while A holds the lock; want ErrUnavailable naming the restarted instances", err)
			}
			lb, err = b.Acquire(ctx, "k", lockswap.WithTTL(maxTTL), lockswap.WithRetry(lockswap.ConstantRetry(20*time.Millisecond)))
			if err != nil {
				t.Fatalf("B after the quarantine: %v", err)
			}
			if got := time.Now(); got.Before(la.Deadline()) {
				t.Errorf("B acquired at %v, before A's deadline %v", got, la.Deadline())
			}
			lb.Release(ctx)
		})
	}
}
