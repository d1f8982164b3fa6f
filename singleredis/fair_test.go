package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	_ "github.com/lockswap/lockswap/redisclient/goredis"
	_ "github.com/lockswap/lockswap/redisclient/redigo"
	_ "github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
	"github.com/lockswap/lockswap/singleredis"
)

// fairClients are the clients that can subscribe (redisclient.Subscriber).
var fairClients = []struct {
	Name string
	New  redistest.NewClient
}{
	{"goredis", redistest.GoRedis},
	{"redigo", redistest.Redigo},
	{"rueidis", redistest.Rueidis},
}

// countingSub counts the requests of a client (redistest.Counting) and
// keeps its Subscribe (the one subscription per Locker is not a request
// per wait, so it is not counted).
type countingSub struct {
	*redistest.Counting
	redisclient.Subscriber
}

func newCounting(c redisclient.Client) *countingSub {
	return &countingSub{Counting: &redistest.Counting{Client: c}, Subscriber: c.(redisclient.Subscriber)}
}

// fairLocker returns a Locker with FairWait over c, closed at cleanup.
func fairLocker(t testing.TB, c redisclient.Client, opts singleredis.Options) *singleredis.Locker {
	t.Helper()
	opts.FairWait = true
	lk, err := singleredis.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// waitFor polls cond (a test's check of the server) every few ms until it
// holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// queued returns how many waiters are registered in the queue of Redis
// key k (the list keeps the entries of waiters that left until they reach
// its head; their registrations are gone).
func queued(raw *goredis.Client, k string) int64 {
	n, _ := raw.HLen(context.Background(), singleredis.FairWaitersKey(k)).Result()
	return n
}

type result struct {
	l   lockswap.Lock
	err error
	at  time.Time
}

// acquireAsync starts an Acquire and returns its result's channel.
func acquireAsync(ctx context.Context, lk lockswap.Locker, key string, opts ...lockswap.Option) <-chan result {
	out := make(chan result, 1)
	go func() {
		l, err := lk.Acquire(ctx, key, opts...)
		out <- result{l, err, time.Now()}
	}()
	return out
}

func TestFairWaitNeedsSubscriber(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := &redistest.Counting{Client: redistest.GoRedis(t, srv.Addr())}
	_, err := singleredis.New(c, singleredis.Options{FairWait: true})
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "Subscriber") {
		t.Fatalf("FairWait over a client that cannot subscribe: %v, want ErrInvalid naming redisclient.Subscriber", err)
	}
}

// TestFairWaitFairness: 8 Lockers, each with its own client (what 8
// processes see), cycling on one key for 3200 cycles, share the
// acquisitions evenly (min ÷ max ≥ 0.95) and never overlap.
func TestFairWaitFairness(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range fairClients {
		t.Run(c.Name, func(t *testing.T) {
			var inside, overlaps atomic.Int32
			// Warm: each Locker opens its subscription on its first wait.
			loop := benchloop.Loop{Shape: benchloop.Contended(8), Warm: 2, NewCycle: func() benchloop.Cycle {
				lk := fairLocker(t, c.New(t, srv.Addr()), singleredis.Options{Prefix: "fair:" + c.Name + ":"})
				return func(ctx context.Context, key string) error {
					l, err := lk.Acquire(ctx, key, lockswap.WithTTL(5*time.Second))
					if err != nil {
						return err
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					inside.Add(-1)
					return l.Release(ctx)
				}
			}}
			// A count of cycles, not a time: with a few dozen cycles each
			// (a loaded machine), one cycle more or less would be 3%, and
			// a Locker 10 turns off the others (seen once beside the
			// whole suite, cause not found) is 2.5% at 400 cycles each.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := loop.Count(ctx, 8*400, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, ok := r.Fairness()
			t.Logf("%d acquisitions in %v (%.0f/s), per Locker %v, fairness %.2f", r.Ops, r.Elapsed, r.PerSec(), r.PerGoroutine, f)
			if !ok || f < 0.95 {
				t.Errorf("fairness %.2f over %v, want ≥ 0.95", f, r.PerGoroutine)
			}
			if n := overlaps.Load(); n != 0 {
				t.Errorf("%d acquisitions overlapped another holder", n)
			}
		})
	}
}

// TestFairWaitHandOverIsOneRequest: a release with a waiter of another
// Locker in the queue is one request, which hands the waiter the lock
// (its token in the key, its TTL, the next fence); the waiter, woken,
// sends nothing more.
func TestFairWaitHandOverIsOneRequest(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, c := range fairClients {
		for _, fence := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fence=%v", c.Name, fence), func(t *testing.T) {
				ctx, key := context.Background(), fmt.Sprintf("ho:%s:%v", c.Name, fence)
				ca, cb := newCounting(c.New(t, srv.Addr())), newCounting(c.New(t, srv.Addr()))
				a := fairLocker(t, ca, singleredis.Options{Fence: fence})
				b := fairLocker(t, cb, singleredis.Options{Fence: fence})
				held, err := a.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				const ttl = 7 * time.Second
				out := acquireAsync(ctx, b, key, lockswap.WithTTL(ttl))
				waitFor(t, 5*time.Second, "the waiter registered", func() bool { return queued(raw, key) == 1 })
				na, nb := ca.Requests(), cb.Requests()
				start := time.Now()
				if err := held.Release(ctx); err != nil {
					t.Fatal(err)
				}
				r := <-out
				if r.err != nil {
					t.Fatalf("waiter: %v", r.err)
				}
				defer r.l.Release(ctx)
				if n := ca.Requests() - na; n != 1 {
					t.Errorf("the releasing Locker sent %d requests, want 1", n)
				}
				if n := cb.Requests() - nb; n != 0 {
					t.Errorf("the woken waiter sent %d requests after its registration, want 0", n)
				}
				if v, _ := raw.Get(ctx, key).Result(); v != r.l.Token() {
					t.Errorf("key holds %q, want the waiter's token %q", v, r.l.Token())
				}
				if pttl, _ := raw.PTTL(ctx, key).Result(); pttl <= 0 || pttl > ttl {
					t.Errorf("key's PTTL %v, want within the waiter's TTL %v", pttl, ttl)
				}
				if d := r.l.Deadline(); !d.After(time.Now()) || d.After(start.Add(ttl)) {
					t.Errorf("waiter's deadline %v after the release began, want within its TTL %v", d.Sub(start), ttl)
				}
				f1, ok1 := held.Fence()
				f2, ok2 := r.l.Fence()
				if ok1 != fence || ok2 != fence || (fence && f2 <= f1) {
					t.Errorf("fences (%d, %v) then (%d, %v), want increasing when fenced", f1, ok1, f2, ok2)
				}
				if n, _ := raw.Exists(ctx, singleredis.FairQueueKey(key), singleredis.FairWaitersKey(key)).Result(); n != 0 {
					t.Errorf("%d queue keys left after the hand-over, want 0", n)
				}
			})
		}
	}
}

// TestFairWaitQuietWhileWaiting: 7 waiters (separate Lockers) of a lock
// held for many of their TTLs send one request each per 3/4 of their TTL
// (the renewal of a registration that lives one TTL): at most 1.5 per TTL.
func TestFairWaitQuietWhileWaiting(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, c := range fairClients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "quiet:"+c.Name
			holder := fairLocker(t, c.New(t, srv.Addr()), singleredis.Options{})
			// The holder extends its lock (3 s, so that it outlives the
			// waiters' registration on a loaded machine): the first waiter
			// wakes at each expiry it saw and finds the key extended.
			held, err := holder.Acquire(ctx, key, lockswap.WithTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			const waiters, ttl = 7, 200 * time.Millisecond
			var counts []*countingSub
			var outs []<-chan result
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for range waiters {
				cc := newCounting(c.New(t, srv.Addr()))
				counts = append(counts, cc)
				outs = append(outs, acquireAsync(wctx, fairLocker(t, cc, singleredis.Options{}), key, lockswap.WithTTL(ttl)))
			}
			waitFor(t, 5*time.Second, "the waiters registered", func() bool { return queued(raw, key) == waiters })
			var before int64
			for _, cc := range counts {
				before += cc.Requests()
			}
			start := time.Now()
			for time.Since(start) < 10*ttl {
				time.Sleep(100 * time.Millisecond) // the holder's work
				if err := held.Extend(ctx, 3*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			var after int64
			for _, cc := range counts {
				after += cc.Requests()
			}
			ttls := float64(time.Since(start)) / float64(ttl)
			perWaiterPerTTL := float64(after-before) / waiters / ttls
			t.Logf("%d requests from %d waiters over %.1f TTLs: %.2f per waiter per TTL", after-before, waiters, ttls, perWaiterPerTTL)
			if perWaiterPerTTL > 1.5 {
				t.Errorf("%.2f requests per waiter per TTL while waiting, want ≤ 1.5 (one per 3/4 TTL)", perWaiterPerTTL)
			}
			// And then they all get it, in turn.
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for i, out := range outs {
				r := <-out
				if r.err != nil {
					t.Fatalf("waiter %d: %v", i, r.err)
				}
				r.l.Release(ctx)
			}
		})
	}
}

// TestFairWaitOrder: waiters of separate Lockers get the lock in the order
// they registered.
func TestFairWaitOrder(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "order"
	holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		lk := fairLocker(t, fairClients[i%len(fairClients)].New(t, srv.Addr()), singleredis.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.Release(ctx)
		}()
		waitFor(t, 5*time.Second, "waiter registered", func() bool { return queued(raw, key) == int64(i+1) })
	}
	held.Release(ctx)
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("order %v, want registration order", order)
		}
	}
}

// TestFairWaitThirdParty: a third-party client using the plain scheme
// (SET NX PX with a random value, retried every millisecond, and
// compare-and-delete) on the same key as fair waiters of separate
// Lockers: no two holders ever overlap, and the third party gets its
// turns too.
func TestFairWaitThirdParty(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "thirdparty"
	var inside, overlaps, ours, theirs atomic.Int32
	enter := func() {
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		time.Sleep(200 * time.Microsecond)
		inside.Add(-1)
	}
	end := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range 4 {
		lk := fairLocker(t, fairClients[i%len(fairClients)].New(t, srv.Addr()), singleredis.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				l, err := lk.Acquire(ctx, key, lockswap.WithTTL(2*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				enter()
				ours.Add(1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
				// Work between turns leaves the queue empty at times:
				// the third party's chance.
				time.Sleep(3 * time.Millisecond)
			}
		}()
	}
	cad := goredis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(end); i++ {
			token := fmt.Sprintf("third-party-%d", i)
			ok, err := raw.SetNX(ctx, key, token, 2*time.Second).Result()
			if err != nil {
				t.Error(err)
				return
			}
			if !ok {
				time.Sleep(time.Millisecond)
				continue
			}
			enter()
			theirs.Add(1)
			if err := cad.Run(ctx, raw, []string{key}, token).Err(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	t.Logf("fair waiters %d acquisitions, third party %d", ours.Load(), theirs.Load())
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d acquisitions overlapped another holder", n)
	}
	if ours.Load() == 0 || theirs.Load() == 0 {
		t.Errorf("acquisitions: fair %d, third party %d; want both > 0", ours.Load(), theirs.Load())
	}
}

// TestFairWaitStarvesPollers shows the weakness of a queue beside a
// poller: while fair waiters keep the queue from emptying (each holder
// releases only once another waiter is queued), every release hands the
// key straight to the next of them, so a third party that polls with SET
// NX PX never finds it free.
func TestFairWaitStarvesPollers(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx, key := context.Background(), "starves"
	first := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	held, err := first.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The second of contention counts from when the waiters are queued
	// (their Lockers' setup on a loaded machine is not part of it).
	var end atomic.Int64 // Unix ns
	end.Store(time.Now().Add(time.Minute).UnixNano())
	running := func(margin time.Duration) bool { return time.Now().Add(margin).UnixNano() < end.Load() }
	var wg sync.WaitGroup
	var ours, theirs atomic.Int32
	for i := range 4 {
		lk := fairLocker(t, fairClients[i%len(fairClients)].New(t, srv.Addr()), singleredis.Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for running(0) {
				l, err := lk.Acquire(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				ours.Add(1)
				// The case the weakness needs, forced rather than hoped for
				// (a loaded machine may leave a released waiter slow to
				// queue again): another waiter is queued when the key is
				// released, so the release hands it over.
				for deadline := time.Now().Add(5 * time.Second); running(0) && queued(raw, key) == 0; {
					if time.Now().After(deadline) {
						t.Error("no other fair waiter queued within 5 s")
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				l.Release(ctx)
			}
		}()
	}
	defer end.Store(0) // the waiters stop, also when waitFor fails
	waitFor(t, 5*time.Second, "the fair waiters queued", func() bool { return queued(raw, key) == 4 })
	end.Store(time.Now().Add(time.Second).UnixNano())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for running(100 * time.Millisecond) {
			ok, err := raw.SetNX(ctx, key, "poller", time.Second).Result()
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				theirs.Add(1)
				raw.Del(ctx, key)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	held.Release(ctx)
	wg.Wait()
	t.Logf("fair waiters %d acquisitions, polling third party %d", ours.Load(), theirs.Load())
	// Starved: a busy machine may delay a hand-over long enough for the
	// poller to slip in once or twice, but never for a share worth the
	// name (under two CPU hogs: 1 against 1877; 0 since each release waits
	// for another waiter queued). 20 hand-overs at least, so that the
	// share means something (a CI machine loaded by other jobs did 86).
	if ours.Load() < 20 || theirs.Load()*100 > ours.Load() {
		t.Errorf("fair %d, polling third party %d: want the poller starved (under 1%%) while the queue never empties", ours.Load(), theirs.Load())
	}
}

// TestFairWaitURL: fair_wait=true in a URL turns the fair wait on (its
// guarantees say "fifo queue"); a value that is not a boolean is refused
// with ErrInvalid.
func TestFairWaitURL(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx := context.Background()
	for _, c := range fairClients {
		lk, err := registry.OpenURL(ctx, "singleredis://"+srv.Addr()+"?fair_wait=true&client="+c.Name)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if w := lk.Guarantees().Wait; w != lockswap.WaitQueue {
			t.Errorf("%s: fair_wait=true: wait style %v, want %v", c.Name, w, lockswap.WaitQueue)
		}
		l, err := lk.Acquire(ctx, "url")
		if err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
		if err := lk.Close(); err != nil {
			t.Errorf("%s: Close: %v", c.Name, err)
		}
	}
	if _, err := registry.OpenURL(ctx, "singleredis://"+srv.Addr()+"?fair_wait=maybe"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "fair_wait") {
		t.Errorf("fair_wait=maybe: %v, want ErrInvalid naming fair_wait", err)
	}
}

// TestFairWaitRequireFair: require=fair (and no-polling) accepts
// singleredis with fair_wait=true and refuses it without.
func TestFairWaitRequireFair(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx := context.Background()
	lk, err := registry.OpenURL(ctx, "singleredis://"+srv.Addr()+"?fair_wait=true&require=fair,no-polling")
	if err != nil {
		t.Fatalf("fair_wait=true&require=fair,no-polling: %v", err)
	}
	lk.Close()
	if _, err := registry.OpenURL(ctx, "singleredis://"+srv.Addr()+"?require=fair"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("polling singleredis with require=fair: %v, want ErrInvalid", err)
	}
}
