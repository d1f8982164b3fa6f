package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// slowDelay is what the proxies add each way in the adaptive-timeout
// tests: a round trip of 100 ms or more, twice the old fixed ceiling of
// the default timeout (50 ms) and twice InstanceTimeoutFloor.
const slowDelay = 50 * time.Millisecond

// proxied returns a Locker with the default (adaptive) instance timeout
// over n redis-servers, each behind a proxy of its own.
func proxied(t *testing.T, n int, newClient redistest.NewClient) (*redlock.Locker, []*testserver.Proxy) {
	t.Helper()
	addrs, _ := realN(t, n)
	proxies := make([]*testserver.Proxy, n)
	cs := make([]redisclient.Client, n)
	for i := range addrs {
		proxies[i] = testserver.ProxyT(t, addrs[i])
		cs[i] = newClient(t, proxies[i].Addr())
	}
	lk, err := redlock.New(cs, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk, proxies
}

// TestAdaptiveTimeoutSlowInstances: instances that answer every request
// slower than the old fixed ceiling of the default timeout (50 ms), but
// well within the TTL, grant locks: a fresh Locker's first TryAcquire
// (InitialInstanceTimeout), and Acquire once the instances that answered
// fast before have become slow (the timeouts double until the answers
// come in, and their round trips set the timeout from then on).
func TestAdaptiveTimeoutSlowInstances(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx := ctxT(t)
			// Well within the TTL; keys that failed attempts leave (a SET
			// that came after its undo) expire soon.
			ttl := 2 * time.Second
			lk, proxies := proxied(t, 3, c.New)
			for _, p := range proxies {
				p.SetDelay(slowDelay)
			}
			l, err := lk.TryAcquire(ctx, "cold", lockswap.WithTTL(ttl))
			if err != nil {
				t.Fatalf("first TryAcquire over instances %v slower each way: %v", slowDelay, err)
			}
			l.Release(ctx)

			lk, proxies = proxied(t, 3, c.New)
			for i := range 10 { // round trips on the idle loopback
				l, err := lk.Acquire(ctx, "warm", lockswap.WithTTL(ttl))
				if err != nil {
					t.Fatalf("warm-up %d: %v", i, err)
				}
				l.Release(ctx)
			}
			for _, p := range proxies {
				p.SetDelay(slowDelay)
			}
			for i := range 3 {
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				l, err := lk.Acquire(actx, fmt.Sprint("slow", i), lockswap.WithTTL(ttl))
				cancel()
				if err != nil {
					t.Fatalf("Acquire %d over instances %v slower each way (TTL %v): %v", i, slowDelay, ttl, err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release %d: %v", i, err)
				}
			}
		})
	}
}

// TestAdaptiveTimeoutHungInstances: an instance that stops answering
// costs each call a bounded time: every request of the acquire round gets
// at most the TTL's budget (TTL × 3/4 − drift, so that the lock keeps a
// quarter of its TTL), whether a minority stopped (the locks are still
// granted) or a majority (ErrUnavailable, not ErrInvalid, while the
// caller's context has time left; Acquire tries again). The wall-clock
// bound of a TryAcquire is what the library promises for one attempt: the
// acquire round, then the undo round and the first attempt's TYPE round,
// each at most max(MinCleanupRound, budget).
func TestAdaptiveTimeoutHungInstances(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx := ctxT(t)
			ttl := 2 * time.Second
			budget := ttl - ttl/4 - redlockDrift(ttl)
			bound := budget + 2*max(redlock.MinCleanupRound, budget) + conformance.Slack
			lk, proxies := proxied(t, 3, c.New)
			for i := range 3 {
				l, err := lk.Acquire(ctx, "warm", lockswap.WithTTL(ttl))
				if err != nil {
					t.Fatalf("warm-up %d: %v", i, err)
				}
				l.Release(ctx)
			}
			try := func(what string) error {
				t.Helper()
				start := time.Now()
				l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(ttl))
				if d := time.Since(start); d > bound {
					t.Errorf("%s: TryAcquire took %v, more than one attempt's bound %v", what, d, bound)
				}
				if err == nil {
					l.Release(ctx)
					return nil
				}
				if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrInvalid) {
					t.Fatalf("%s: TryAcquire: %v, want success or ErrUnavailable", what, err)
				}
				for _, m := range noAnswerWithin.FindAllStringSubmatch(err.Error(), -1) {
					if d, perr := time.ParseDuration(m[1]); perr != nil || d > budget {
						t.Errorf("%s: an instance was given %s (%v), more than the TTL's budget %v: %v", what, m[1], perr, budget, err)
					}
				}
				return err
			}

			proxies[0].Blackhole(true)
			defer proxies[0].Blackhole(false)
			for range 5 {
				try("one of three silent")
			}
			l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(ttl))
			if err != nil {
				t.Fatalf("Acquire with one of three silent: %v", err)
			}
			l.Release(ctx)

			proxies[1].Blackhole(true)
			defer proxies[1].Blackhole(false)
			for i := range 3 {
				err := try("two of three silent")
				if err == nil {
					t.Fatalf("two of three silent: TryAcquire %d succeeded", i)
				}
				if !noAnswerWithin.MatchString(err.Error()) {
					t.Errorf("two of three silent: %v, want it to say the instances did not answer within their timeout", err)
				}
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err = lk.Acquire(actx, "k", lockswap.WithTTL(ttl), lockswap.WithRetry(lockswap.LimitedRetry(10*time.Millisecond, 2)))
			if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrInvalid) || actx.Err() != nil {
				t.Fatalf("Acquire with two of three silent: %v (context: %v), want ErrUnavailable after its retries, within the context", err, actx.Err())
			}
		})
	}
}

// noAnswerWithin finds the timeouts an outage error names.
var noAnswerWithin = regexp.MustCompile(`no answer within ([0-9.]+[µmn]?s)`)
