package singleredis_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// giveUpWaiters is how many waiters TestFairWaitGiveUpBurst starts per
// case (-giveup-waiters=10000 for the size of issue 28).
var giveUpWaiters = flag.Int("giveup-waiters", 200, "waiters of TestFairWaitGiveUpBurst")

// TestFairWaitOutageIsNotHeld: an Acquire with FairWait of a free key on a
// server that never answers (a proxy that accepts and holds every byte)
// ends with ErrUnavailable and the context's error, never ErrHeld: nobody
// said the key was held. Both before the Locker's subscription is open
// (the subscription hangs) and after (the wait request hangs); TryAcquire
// as well.
func TestFairWaitOutageIsNotHeld(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range fairClients {
		for _, subscribed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/subscribed=%v", c.Name, subscribed), func(t *testing.T) {
				proxy := testserver.ProxyT(t, srv.Addr())
				lk := fairLocker(t, c.New(t, proxy.Addr()), singleredis.Options{})
				key := fmt.Sprintf("outage:%s:%v", c.Name, subscribed)
				if subscribed {
					l, err := lk.Acquire(context.Background(), key+":warm")
					if err != nil {
						t.Fatal(err)
					}
					if err := l.Release(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				proxy.Blackhole(true)
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				l, err := lk.Acquire(ctx, key)
				if l != nil || errors.Is(err, lockswap.ErrHeld) || !errors.Is(err, lockswap.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Acquire of a free key on a hung server = (%v, %v), want ErrUnavailable and context.DeadlineExceeded, not ErrHeld", l, err)
				}
				tctx, tcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer tcancel()
				l, err = lk.TryAcquire(tctx, key)
				if l != nil || errors.Is(err, lockswap.ErrHeld) || !errors.Is(err, lockswap.ErrUnavailable) {
					t.Errorf("TryAcquire of a free key on a hung server = (%v, %v), want ErrUnavailable, not ErrHeld", l, err)
				}
			})
		}
	}
}

// TestFairWaitGiveUpBurst: many waiters that give up at once (their
// contexts end together) stop blocking the key within one TTL: after the
// holder's release, a fresh Acquire gets the free key within the TTL (a
// lock handed to a waiter that had gone costs one), not after one dead
// registration after another. "gone" is tried two ways: waiters whose
// contexts end (they take themselves out), and waiters whose connections
// are cut before their contexts end (a crashed process: only the
// registrations' expiry takes them out).
func TestFairWaitGiveUpBurst(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "cancelled", true: "crashed"}[crash], func(t *testing.T) {
			ctx, key := context.Background(), fmt.Sprintf("burst:%v", crash)
			n := *giveUpWaiters
			// Every waiter renews its registration every 3/4 TTL: with
			// thousands, a TTL long enough that the renewals of all fit
			// on a loaded 2-core machine (10,000: 2.5 s).
			ttl := max(500*time.Millisecond, time.Duration(n)*250*time.Microsecond)
			holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
			held, err := holder.Acquire(ctx, key, lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			proxy := testserver.ProxyT(t, srv.Addr())
			waiters := fairLocker(t, redistest.GoRedis(t, proxy.Addr()), singleredis.Options{})
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var wg sync.WaitGroup
			returned := make([]time.Time, n)
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := waiters.Acquire(wctx, key, lockswap.WithTTL(ttl))
					returned[i] = time.Now()
					if l != nil {
						l.Release(ctx)
					}
					errs <- err
				}()
			}
			waitFor(t, time.Minute, "the waiters registered", func() bool { return queued(raw, key) >= int64(n) })
			if crash {
				proxy.Partition(true)
			}
			gaveUpProbe := conformance.StartLagProbe()
			gaveUp := time.Now()
			cancel()
			wg.Wait()
			gaveUpProbe.Stop()
			close(errs)
			for err := range errs {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("a waiter that gave up: %v, want context.Canceled", err)
				}
			}
			// Each returns within the cancel + DeadlineGrace
			// (docs/errors.md), plus the scheduler's delays: it leaves
			// the queue in the background, not before it returns.
			last := time.Duration(0)
			for _, at := range returned {
				last = max(last, at.Sub(gaveUp))
			}
			t.Logf("%d waiters gave up, the last returned %v after the cancel (allowed %v, lags up to %v)", n,
				last.Round(time.Millisecond), gaveUpProbe.Allowance().Round(time.Millisecond), gaveUpProbe.Max().Round(time.Millisecond))
			if last > gaveUpProbe.Allowance() {
				t.Errorf("a waiter returned %v after the cancel, want within %v (DeadlineGrace %v + the scheduler's delays, lags up to %v)",
					last.Round(time.Millisecond), gaveUpProbe.Allowance().Round(time.Millisecond), lockswap.DeadlineGrace, gaveUpProbe.Max().Round(time.Millisecond))
			}
			if !crash {
				waitFor(t, 10*time.Second, "the waiters that gave up left the queue", func() bool {
					left, _ := raw.HLen(ctx, singleredis.FairWaitersKey(key)).Result()
					return left == 0
				})
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			probe := conformance.StartLagProbe()
			fresh := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
			actx, acancel := context.WithTimeout(ctx, 30*time.Second)
			defer acancel()
			l, err := fresh.Acquire(actx, key, lockswap.WithTTL(ttl))
			took := time.Since(released)
			probe.Stop()
			if err != nil {
				t.Fatalf("fresh Acquire after the burst: %v", err)
			}
			l.Release(ctx)
			// The bound, from the release: waiters that gave up took
			// themselves out, so the key is free at once, but a lock
			// handed to one of them as it left costs one TTL. Crashed
			// waiters, counted from the crash: their registrations expire
			// one TTL after their last renewal (which came before the
			// crash), a lock handed to one of them just before that holds
			// the key one TTL more, and the waiter behind asks within 3/4
			// of its TTL after that.
			allowed := ttl + probe.Allowance()
			if crash {
				allowed = max(3*ttl-released.Sub(gaveUp), ttl) + probe.Allowance()
			}
			t.Logf("fresh Acquire took the key %v after the release (allowed %v, lags up to %v)", took.Round(time.Millisecond), allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond))
			if took > allowed {
				t.Errorf("fresh Acquire took the free key %v after the release, want within the TTL (%v; allowed %v with lags up to %v)",
					took.Round(time.Millisecond), ttl, allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond))
			}
		})
	}
}

// TestFairWaitQueueLimit: a key's fair queue takes at most MaxFairWaiters
// (here lowered to 3); an Acquire past it is not queued and fails as
// contention (ErrHeld), or with its retry policy polls until a place is
// free, and then queues.
func TestFairWaitQueueLimit(t *testing.T) {
	const limit = 3
	singleredis.SetFairWaitersLimit(t, limit)
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "limit"
	lk := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := lk.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var outs []<-chan result
	for i := range limit {
		outs = append(outs, acquireAsync(wctx, lk, key))
		waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == int64(i+1) })
	}
	l, err := lk.Acquire(ctx, key, lockswap.WithRetry(lockswap.NoRetry()))
	if l != nil || !errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("Acquire past a full queue = (%v, %v), want ErrHeld", l, err)
	}
	if n := queued(raw, key); n != limit {
		t.Fatalf("%d waiters queued after an Acquire past the limit, want %d", n, limit)
	}
	// With the default policy it polls, and queues once a place is free.
	late := acquireAsync(ctx, lk, key)
	time.Sleep(50 * time.Millisecond) // a few polls, none queued
	if n := queued(raw, key); n != limit {
		t.Fatalf("%d waiters queued while the queue is full, want %d", n, limit)
	}
	cancel()
	for _, out := range outs {
		if r := <-out; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("a cancelled waiter: %v", r.err)
		}
	}
	waitFor(t, 5*time.Second, "the late waiter queued", func() bool { return queued(raw, key) == 1 })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-late
	if r.err != nil {
		t.Fatalf("the waiter that found the queue full, once a place was free: %v", r.err)
	}
	r.l.Release(ctx)
}

// TestFairWaitOutageBoundWhileQueued: a fair waiter queued with a long TTL
// (its registration renewed every 3/4 of it) notices a server that stopped
// answering within its outage bound (WithMaxOutage), not at its next
// renewal: an Acquire with no deadline ends with ErrUnavailable, not
// ErrHeld, within the bound plus DeadlineGrace (plus the scheduling lags
// measured meanwhile).
func TestFairWaitOutageBoundWhileQueued(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	proxy := testserver.ProxyT(t, srv.Addr())
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "outage-queued"
	holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := holder.Acquire(ctx, key, lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	lk := fairLocker(t, redistest.GoRedis(t, proxy.Addr()), singleredis.Options{})
	const bound = 2 * time.Second
	type result struct {
		err  error
		took time.Duration
	}
	out := make(chan result, 1)
	go func() {
		begin := time.Now()
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(time.Minute), lockswap.WithMaxOutage(bound))
		if err == nil {
			l.Release(ctx)
		}
		out <- result{err, time.Since(begin)}
	}()
	waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
	waitFor(t, 5*time.Second, "the waiter waiting for its wake-up", waitingForWakeUp)
	probe := conformance.StartLagProbe()
	proxy.Blackhole(true)
	defer proxy.Blackhole(false)
	stopped := time.Now()
	select {
	case r := <-out:
		probe.Stop()
		if !errors.Is(r.err, lockswap.ErrUnavailable) || errors.Is(r.err, lockswap.ErrHeld) {
			t.Errorf("Acquire queued when the server stopped answering: %v, want ErrUnavailable only", r.err)
		}
		// The outage counts from the last answer, which came before the
		// server stopped.
		if d, allowed := time.Since(stopped), bound+lockswap.DeadlineGrace+probe.Allowance(); d > allowed {
			t.Errorf("Acquire returned %v after the server stopped answering, want within the outage bound %v (allowed %v)", d, bound, allowed)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire queued with a 1-minute TTL still waiting 20 s after the server stopped answering: the outage went unnoticed until the renewal at 45 s")
	}
}
