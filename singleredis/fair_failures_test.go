package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestFairWaitDeadWaiter: a waiter whose connections are cut (its process
// gone, as far as Redis can tell) holds the queue up no longer than its
// registration, or the TTL of a lock handed to it: the waiter behind it
// gets the lock within that bound.
func TestFairWaitDeadWaiter(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "dead"
	holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	proxy := testserver.ProxyT(t, srv.Addr())
	dead := fairLocker(t, redistest.GoRedis(t, proxy.Addr()), singleredis.Options{})
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	deadOut := acquireAsync(dctx, dead, key, lockswap.WithTTL(ttl))
	waitFor(t, 5*time.Second, "the doomed waiter registered", func() bool { return queued(raw, key) == 1 })
	next := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	// The bound: the dead waiter's registration (one TTL; 3 TTLs + 0.5 s
	// before issue 28) and the TTL of a lock handed to it, with room for a
	// loaded machine.
	bound := 3*ttl + 500*time.Millisecond + ttl + 2*time.Second
	nctx, ncancel := context.WithTimeout(ctx, bound)
	defer ncancel()
	nextOut := acquireAsync(nctx, next, key, lockswap.WithTTL(ttl))
	waitFor(t, 5*time.Second, "the next waiter registered", func() bool { return queued(raw, key) == 2 })
	proxy.Partition(true) // the waiter's process is gone
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-nextOut
	if r.err != nil {
		t.Fatalf("the waiter behind a dead one: %v, want the lock within %v", r.err, bound)
	}
	r.l.Release(ctx)
	dcancel()
	<-deadOut
}

// TestFairWaitClosedWaiter: a Locker closed while its waiter is queued
// takes it out of the queue (or, failing that, its registration expires):
// the next waiter gets the lock at the release.
func TestFairWaitClosedWaiter(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "closed"
	holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	gone := fairLocker(t, redistest.Redigo(t, srv.Addr()), singleredis.Options{})
	goneOut := acquireAsync(ctx, gone, key)
	waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
	next := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	nextOut := acquireAsync(ctx, next, key)
	waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 2 })
	gone.Close()
	if r := <-goneOut; !errors.Is(r.err, lockswap.ErrClosed) {
		t.Fatalf("waiter of a closed Locker: %v, want ErrClosed", r.err)
	}
	if n := queued(raw, key); n != 1 {
		t.Errorf("%d waiters queued after Close, want 1", n)
	}
	held.Release(ctx)
	r := <-nextOut
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Release(ctx)
}

// TestFairWaitLostWakeUp: a hand-over whose wake-up is lost (here: the key
// handed without a message, as a Pub/Sub connection that broke at that
// moment would lose it) is found by the waiter's next request: at the
// previous holder's expiry for the first waiter.
func TestFairWaitLostWakeUp(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, fence := range []bool{false, true} {
		t.Run(fmt.Sprintf("fence=%v", fence), func(t *testing.T) {
			ctx, key := context.Background(), fmt.Sprintf("lost:%v", fence)
			// A holder (a third party) with 1 s left: the new Locker
			// subscribes and registers, and the hand-over below runs,
			// before it expires, also on a loaded machine (300 ms did
			// not always hold).
			if err := raw.Set(ctx, key, "other", time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			lk := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: fence})
			out := acquireAsync(ctx, lk, key, lockswap.WithTTL(5*time.Second))
			waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
			token, err := raw.LIndex(ctx, singleredis.FairQueueKey(key), 0).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The hand-over of the release script, without its PUBLISH.
			if _, err := raw.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.LPop(ctx, singleredis.FairQueueKey(key))
				p.HDel(ctx, singleredis.FairWaitersKey(key), token)
				p.Set(ctx, key, token, 5*time.Second)
				if fence {
					p.Set(ctx, singleredis.FenceKey(key), "12345", 0)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			r := <-out
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.l.Token() != token {
				t.Errorf("lock token %q, want the handed %q", r.l.Token(), token)
			}
			if f, ok := r.l.Fence(); fence && (!ok || f != 12345) {
				t.Errorf("fence %d %v, want the handed 12345", f, ok)
			}
			if err := r.l.Release(ctx); err != nil {
				t.Errorf("release of the handed lock: %v", err)
			}
		})
	}
}

// TestFairWaitHolderDies: when the holder dies without releasing (a third
// party's plain SET NX PX here), the first waiter takes the key once it
// expires, without a release and without polling: within the key's PTTL
// and a margin.
func TestFairWaitHolderDies(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "holderdies"
	const pttl = 400 * time.Millisecond
	if ok, err := raw.SetNX(ctx, key, "dead-holder", pttl).Result(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	cc := newCounting(redistest.GoRedis(t, srv.Addr()))
	lk := fairLocker(t, cc, singleredis.Options{})
	actx, cancel := context.WithTimeout(ctx, pttl+2*time.Second)
	defer cancel()
	l, err := lk.Acquire(actx, key)
	if err != nil {
		t.Fatalf("waiter of a dead holder: %v", err)
	}
	l.Release(ctx)
	if n := cc.Requests(); n > 4 {
		t.Errorf("%d requests to wait for a key with %v left, want a few (no polling)", n, pttl)
	}
}

// TestFairWaitCancelAndClose: a waiter whose context ends returns at once
// and leaves the queue; Close ends the waits with ErrClosed and the
// Locker's subscription goroutine.
func TestFairWaitCancelAndClose(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, c := range fairClients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "cancel:"+c.Name
			holder := fairLocker(t, c.New(t, srv.Addr()), singleredis.Options{})
			held, err := holder.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			lk, err := singleredis.New(c.New(t, srv.Addr()), singleredis.Options{FairWait: true})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			out := acquireAsync(wctx, lk, key)
			// Registered, and told so: a cancellation while the
			// registration's answer is on its way is an outage
			// (ErrUnavailable), not news that the key is held.
			waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
			waitFor(t, 5*time.Second, "the waiter waiting for its wake-up", waitingForWakeUp)
			cancel()
			r := <-out
			if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, lockswap.ErrHeld) {
				t.Errorf("cancelled wait: %v, want context.Canceled and ErrHeld", r.err)
			}
			if n := queued(raw, key); n != 0 {
				t.Errorf("%d waiters queued after the cancellation, want 0", n)
			}
			out = acquireAsync(ctx, lk, key)
			waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
			subs := strings.Count(stacks(), "Sub).run")
			lk.Close()
			if r := <-out; !errors.Is(r.err, lockswap.ErrClosed) {
				t.Errorf("wait ended by Close: %v, want ErrClosed", r.err)
			}
			waitFor(t, 5*time.Second, "the subscription goroutine ended", func() bool {
				return strings.Count(stacks(), "Sub).run") == subs-1
			})
			if _, err := lk.Acquire(ctx, key); !errors.Is(err, lockswap.ErrClosed) {
				t.Errorf("Acquire after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// waitingForWakeUp reports whether a fair waiter is between its requests:
// blocked in (*fair).Wait itself, not in a request to the server, so the
// server's answer to its registration has reached it.
func waitingForWakeUp() bool {
	for _, g := range strings.Split(stacks(), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[running") || strings.Contains(header, "[runnable") {
			continue
		}
		for strings.HasPrefix(frames, "runtime.") { // with GOTRACEBACK=system
			_, frames, _ = strings.Cut(frames, "\n")
			_, frames, _ = strings.Cut(frames, "\n")
		}
		if strings.HasPrefix(frames, "github.com/lockswap/lockswap/singleredis.(*fair).Wait(") {
			return true
		}
	}
	return false
}

// TestFairWaitGivenUpAfterHandOver: a lock (a permit) handed to a waiter
// as its context ends is given back (released, to the next waiter),
// never left held by nobody.
func TestFairWaitGivenUpAfterHandOver(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	for _, kind := range []struct {
		name string
		opts []lockswap.Option
	}{{"mutex", nil}, {"permit", []lockswap.Option{lockswap.WithPermits(1)}}} {
		t.Run(kind.name, func(t *testing.T) {
			key := "givenup:" + kind.name
			for i := range 20 {
				holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: true})
				held, err := holder.Acquire(ctx, key, kind.opts...)
				if err != nil {
					t.Fatal(err)
				}
				w := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: true})
				wctx, cancel := context.WithCancel(ctx)
				out := acquireAsync(wctx, w, key, kind.opts...)
				waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, key) == 1 })
				// Release and cancel at once: the hand-over and the give-up race.
				go held.Release(ctx)
				if i%2 == 0 {
					time.Sleep(time.Duration(i) * 50 * time.Microsecond)
				}
				cancel()
				r := <-out
				if r.err == nil {
					r.l.Release(ctx)
				}
				waitFor(t, 5*time.Second, "the key free again", func() bool {
					n, _ := raw.Exists(ctx, key).Result()
					return n == 0
				})
			}
		})
	}
}
