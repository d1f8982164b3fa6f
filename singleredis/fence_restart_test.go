package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

// fenceBound is 2^53: every fence must stay below it.
const fenceBound = 1 << 53

// acquireSoon takes key through lk, polling for at most 10 s: right after
// a restart the clients' pooled connections fail once (ErrUnavailable).
func acquireSoon(t *testing.T, lk lockswap.Locker, key string) lockswap.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := acquire.Retry(ctx, lockswap.ConstantRetry(5*time.Millisecond), func(ctx context.Context) (lockswap.Lock, error) {
		return lk.TryAcquire(ctx, key, lockswap.WithTTL(time.Minute))
	})
	if err != nil {
		t.Fatalf("acquire %q: %v", key, err)
	}
	return l
}

// restartEmpty kills srv and starts it again without persistence, and
// checks that it came back empty (the fence counters are gone).
func restartEmpty(t *testing.T, srv *testserver.Redis, raw *goredis.Client) {
	t.Helper()
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var n int64
	queuetest.WaitUntil(t, "the restarted server answers DBSIZE", func() bool {
		var err error
		n, err = raw.DBSize(context.Background()).Result()
		return err == nil
	})
	if n != 0 {
		t.Fatalf("the server restarted with %d keys; the test needs it empty", n)
	}
}

// TestFenceAfterRestartRejectsStaleHolder: a holder pauses while Redis
// restarts empty; a second client takes the key (the lock is lost, as
// declared), and its fence is higher than the paused holder's although the
// counter started again from nothing, so the resource accepts the new
// holder's write and rejects the stale one's.
func TestFenceAfterRestartRejectsStaleHolder(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "restart-fence-"+c.Name
			a := newLocker(t, srv.Addr(), c.New, singleredis.Options{Fence: true})
			b := newLocker(t, srv.Addr(), c.New, singleredis.Options{Fence: true})
			var res fenced.Resource

			// The holder writes once, then pauses until resumed and writes
			// again with the same fence.
			type woke struct{ write, release error }
			resume := make(chan struct{})
			var resumeOnce sync.Once
			wake := func() { resumeOnce.Do(func() { close(resume) }) }
			defer wake() // a failed test does not leave the holder paused
			held := make(chan uint64, 1)
			failed := make(chan error, 1)
			after := make(chan woke, 1)
			go func() {
				l, err := a.TryAcquire(ctx, key, lockswap.WithTTL(time.Minute))
				if err == nil {
					f, _ := l.Fence()
					if err = res.Write("a", f); err == nil {
						held <- f
						<-resume // paused
						werr := res.Write("a", f)
						after <- woke{werr, l.Release(ctx)}
						return
					}
				}
				failed <- err
			}()
			var fa uint64
			select {
			case fa = <-held:
			case err := <-failed:
				t.Fatalf("first holder: %v", err)
			}

			restartEmpty(t, srv, raw)
			lb := acquireSoon(t, b, key)
			fb, ok := lb.Fence()
			if !ok {
				t.Fatal("fenced lock without a fence")
			}
			if fb <= fa || fa >= fenceBound || fb >= fenceBound {
				t.Fatalf("fence after the restart %d, before %d: want higher, both below 2^53", fb, fa)
			}
			if err := res.Write("b", fb); err != nil {
				t.Fatalf("new holder's write: %v", err)
			}
			wake()
			var w woke
			select {
			case w = <-after:
			case <-time.After(10 * time.Second):
				t.Fatal("the woken holder did not write and release within 10 s")
			}
			if !errors.Is(w.write, fenced.ErrStale) {
				t.Fatalf("paused holder's write after the restart: %v, want ErrStale", w.write)
			}
			if !errors.Is(w.release, lockswap.ErrLost) {
				t.Errorf("paused holder's Release after the restart: %v, want ErrLost", w.release)
			}
			if st := res.Stats(); st.LastWriter != "b" || st.Rejected != 1 || st.HighestFence != fb {
				t.Errorf("resource = %+v; the stale write must change nothing", st)
			}
			if err := lb.Release(ctx); err != nil {
				t.Errorf("new holder's Release: %v", err)
			}
		})
	}
}

// TestFenceAfterFailoverToLaggingReplica: the replica receives the
// counter's new values (the script's effects), then stops receiving them;
// the primary gives more fences and dies, and the promoted replica, whose
// counter lags, still gives a higher fence than every one of the primary's:
// its clock covers what it missed (one host, one clock here; see
// Guarantees for replicas whose clocks are behind).
func TestFenceAfterFailoverToLaggingReplica(t *testing.T) {
	primary := testserver.RedisT(t, testserver.RedisOptions{})
	link := testserver.ProxyT(t, primary.Addr())
	replica := testserver.RedisT(t, testserver.RedisOptions{ReplicaOf: link.Addr()})
	ctx, key := context.Background(), "failover-fence"
	fk := singleredis.FenceKey(key)
	praw := redistest.GoRedisClient(t, primary.Addr())
	rraw := redistest.GoRedisClient(t, replica.Addr())
	queuetest.WaitUntil(t, "the replica linked", func() bool {
		info, _ := rraw.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	a := newLocker(t, primary.Addr(), redistest.GoRedis, singleredis.Options{Fence: true})
	var last uint64
	take := func() lockswap.Lock {
		t.Helper()
		l, err := a.TryAcquire(ctx, key, lockswap.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		f, _ := l.Fence()
		if f <= last {
			t.Fatalf("fence %d after %d", f, last)
		}
		last = f
		return l
	}
	for i := 0; i < 5; i++ {
		take().Release(ctx)
	}
	replicated := strconv.FormatUint(last, 10)
	queuetest.WaitUntil(t, "the replica received the counter and the last release", func() bool {
		v, _ := rraw.Get(ctx, fk).Result()
		n, _ := rraw.Exists(ctx, key).Result()
		return v == replicated && n == 0
	})
	link.Blackhole(true) // from now on the replica lags
	for i := 0; i < 5; i++ {
		take().Release(ctx)
	}
	la := take() // the holder that will be stale
	if v, _ := praw.Get(ctx, fk).Result(); v != strconv.FormatUint(last, 10) {
		t.Fatalf("primary's counter %q, want the last fence %d", v, last)
	}
	if v, _ := rraw.Get(ctx, fk).Result(); v != replicated {
		t.Fatalf("replica's counter %q, want the lagging %s", v, replicated)
	}
	primary.Kill()
	if err := rraw.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatalf("promote replica: %v", err)
	}
	b := newLocker(t, replica.Addr(), redistest.Redigo, singleredis.Options{Fence: true})
	lb := acquireSoon(t, b, key)
	fb, _ := lb.Fence()
	if fb <= last || fb >= fenceBound {
		t.Fatalf("fence %d on the promoted replica, %d the primary's last: want higher, below 2^53", fb, last)
	}
	var res fenced.Resource
	if err := res.Write("b", fb); err != nil {
		t.Fatal(err)
	}
	if fa, _ := la.Fence(); !errors.Is(res.Write("a", fa), fenced.ErrStale) {
		t.Fatalf("the old primary's holder (fence %d) was not rejected after %d", fa, fb)
	}
	lb.Release(ctx)
}

// TestFencesIncreaseAcrossRestarts: 1000 acquisitions of one key, in three
// rounds separated by two restarts without persistence, get strictly
// increasing fences below 2^53. In each round two goroutines of one Locker
// take turns, so most acquisitions are hand-overs (fencedHandOver) and the
// others plain fenced acquires; the fences are recorded while the lock is
// held, so in acquisition order.
func TestFencesIncreaseAcrossRestarts(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	const total, rounds, goroutines = 1000, 3, 2
	sc := &scriptCounter{Client: redistest.GoRedis(t, srv.Addr()), fenceKey: singleredis.FenceKey("seq")}
	lk, err := singleredis.New(sc, singleredis.Options{Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	var (
		mu     sync.Mutex
		fences []uint64
		bounds []int // len(fences) at each restart
	)
	for round := 0; round < rounds; round++ {
		if round > 0 {
			bounds = append(bounds, len(fences))
			restartEmpty(t, srv, raw)
			// The first attempt after the restart may meet a dead pooled
			// connection; take and give back the key once before counting.
			l := acquireSoon(t, lk, "warm-up")
			l.Release(context.Background())
		}
		n := total / rounds
		if round == rounds-1 {
			n = total - len(fences)
		}
		handOvers := sc.handOvers.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		var next atomic.Int64
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					l, err := lk.Acquire(ctx, "seq", lockswap.WithTTL(time.Minute),
						lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
					if err != nil {
						errs <- err
						return
					}
					f, ok := l.Fence()
					mu.Lock()
					if !ok {
						f = 0
					}
					fences = append(fences, f)
					mu.Unlock()
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		if h := sc.handOvers.Load() - handOvers; h == 0 {
			t.Errorf("round %d: no hand-over among %d acquisitions; the hand-over script's fences were not checked", round, n)
		} else {
			t.Logf("round %d: %d acquisitions, %d of them by a hand-over", round, n, h)
		}
	}
	if len(fences) != total {
		t.Fatalf("%d acquisitions, want %d", len(fences), total)
	}
	seen := make(map[uint64]int, total)
	for i, f := range fences {
		if f == 0 || f >= fenceBound {
			t.Fatalf("fence #%d = %d, want in [1, 2^53)", i, f)
		}
		if j, dup := seen[f]; dup {
			t.Fatalf("fence %d given twice (#%d and #%d; restarts after #%v)", f, j, i, bounds)
		}
		seen[f] = i
		if i > 0 && f <= fences[i-1] {
			t.Fatalf("fence #%d = %d after #%d = %d (restarts after #%v): not increasing", i, f, i-1, fences[i-1], bounds)
		}
	}
	t.Logf("fences %d … %d; across the restarts: %d → %d, %d → %d", fences[0], fences[total-1],
		fences[bounds[0]-1], fences[bounds[0]], fences[bounds[1]-1], fences[bounds[1]])
}

// TestFenceIsCounterOrClock: a fence is max(counter + 1, the server's
// clock in microseconds): the clock when the counter is missing or behind
// (an old INCR counter), the counter + 1 when the clock stands still or
// has gone back behind the counter.
func TestFenceIsCounterOrClock(t *testing.T) {
	ctx := context.Background()
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		t0 := time.Date(2026, 11, 23, 12, 0, 0, 123456000, time.UTC)
		mr.SetTime(t0) // TIME answers t0 until told otherwise
		lk := newLocker(t, mr.Addr(), redistest.GoRedis, singleredis.Options{Fence: true})
		fk := singleredis.FenceKey("job")
		take := func() uint64 {
			t.Helper()
			l, err := lk.TryAcquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			f, _ := l.Fence()
			if v, _ := mr.Get(fk); v != strconv.FormatUint(f, 10) {
				t.Fatalf("counter %q after fence %d", v, f)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			return f
		}
		us := uint64(t0.UnixMicro())
		if f := take(); f != us {
			t.Errorf("no counter: fence %d, want the clock %d", f, us)
		}
		if f := take(); f != us+1 {
			t.Errorf("clock standing still: fence %d, want counter + 1 = %d", f, us+1)
		}
		mr.Set(fk, "41") // a counter of the INCR scheme
		if f := take(); f != us {
			t.Errorf("counter 41: fence %d, want the clock %d", f, us)
		}
		mr.Set(fk, strconv.FormatUint(us+5_000_000, 10)) // the clock went back 5 s
		if f := take(); f != us+5_000_001 {
			t.Errorf("counter ahead of the clock: fence %d, want counter + 1 = %d", f, us+5_000_001)
		}
		mr.Set(fk, strconv.FormatUint(fenceBound-2, 10))
		if f := take(); f != fenceBound-1 {
			t.Errorf("counter 2^53-2: fence %d, want 2^53-1, the last one", f)
		}
	})
	t.Run("redis-server", func(t *testing.T) {
		srv := testserver.RedisT(t, testserver.RedisOptions{})
		raw := redistest.GoRedisClient(t, srv.Addr())
		for _, c := range redistest.Clients {
			lk := newLocker(t, srv.Addr(), c.New, singleredis.Options{Fence: true})
			key := "clock-" + c.Name
			raw.Set(ctx, singleredis.FenceKey(key), "41", 0)
			t1, err := raw.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			l, err := lk.TryAcquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			t2, _ := raw.Time(ctx).Result()
			f, _ := l.Fence()
			if f < uint64(t1.UnixMicro()) || f > uint64(t2.UnixMicro()) {
				t.Errorf("%s: fence %d, want the server clock, between %d and %d", c.Name, f, t1.UnixMicro(), t2.UnixMicro())
			}
			l.Release(ctx)
			ahead := uint64(t2.UnixMicro()) + 3600_000_000 // as after the clock went back an hour
			raw.Set(ctx, singleredis.FenceKey(key), strconv.FormatUint(ahead, 10), 0)
			l, err = lk.TryAcquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if f, _ := l.Fence(); f != ahead+1 {
				t.Errorf("%s: counter ahead of the clock: fence %d, want %d", c.Name, f, ahead+1)
			}
			l.Release(ctx)
		}
	})
}

// badCounter is a value under the fence counter that cannot give a fence.
type badCounter struct {
	name  string
	spoil func(ctx context.Context, raw *goredis.Client, k string) error
	// says is part of the error message.
	says string
}

var badCounters = []badCounter{
	{"garbage", setString("not a number"), "non-negative integer"},
	{"negative", setString("-5"), "non-negative integer"},
	{"empty", setString(""), "non-negative integer"},
	{"int64-max", setString("9223372036854775807"), "2^53"},
	{"2^53", setString("9007199254740992"), "2^53"},
	{"2^53-1", setString("9007199254740991"), "2^53"}, // the next fence would be 2^53
	{"30-digits", setString("123456789012345678901234567890"), "2^53"},
	{"hash", func(ctx context.Context, raw *goredis.Client, k string) error {
		return raw.HSet(ctx, k, "f", "v").Err()
	}, "another Redis type"},
	{"list", func(ctx context.Context, raw *goredis.Client, k string) error {
		return raw.RPush(ctx, k, "a", "b").Err()
	}, "another Redis type"},
}

func setString(v string) func(ctx context.Context, raw *goredis.Client, k string) error {
	return func(ctx context.Context, raw *goredis.Client, k string) error {
		return raw.Set(ctx, k, v, 0).Err()
	}
}

// snapshot describes what k holds, for before/after comparisons that work
// on miniredis too (which has no DUMP).
func snapshot(t *testing.T, raw *goredis.Client, k string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := raw.Type(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ {
	case "string":
		v, err = raw.Get(ctx, k).Result()
	case "hash":
		v, err = raw.HGetAll(ctx, k).Result()
	case "list":
		v, err = raw.LRange(ctx, k, 0, -1).Result()
	case "none":
	default:
		t.Fatalf("snapshot of a %s", typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := raw.PTTL(ctx, k).Result()
	return fmt.Sprintf("%s %q ttl=%v", typ, fmt.Sprint(v), ttl > 0)
}

// scriptCounter counts the fenced scripts run for one counter key: the
// fenced acquire (KEYS key and counter; ARGV token, TTL and the counter's
// life) and the fenced hand-over (ARGV our token, the waiter's token, TTL
// and the counter's life).
type scriptCounter struct {
	redisclient.Client
	fenceKey            string
	acquires, handOvers atomic.Int64
}

func (c *scriptCounter) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	if len(keys) == 2 && keys[1] == c.fenceKey {
		if len(args) == 4 {
			c.handOvers.Add(1)
		} else {
			c.acquires.Add(1)
		}
	}
	return c.Client.Run(ctx, s, keys, args...)
}

// checkBadCounterErr checks the error of an attempt that met a bad counter.
func checkBadCounterErr(t *testing.T, what string, err error, key string, bc badCounter) {
	t.Helper()
	if !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("%s: %v, want ErrInvalid only", what, err)
		return
	}
	msg := err.Error()
	for _, want := range []string{"singleredis", lockstate.QuoteKey(key), lockstate.QuoteKey(singleredis.FenceKey(key)), bc.says} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: error %q does not name %q", what, msg, want)
		}
	}
	if len(msg) > 700 {
		t.Errorf("%s: error of %d bytes; the key must be cut", what, len(msg))
	}
}

// TestBadFenceCounter: a fence counter that cannot give a fence below 2^53
// fails TryAcquire, Acquire (at once, one attempt, however long its
// context) and a hand-over to a waiting Acquire with ErrInvalid naming the
// backend, the key and the counter; the lock key is not written and the
// counter is left as it was.
func TestBadFenceCounter(t *testing.T) {
	servers := []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
		{"redis-server", func(t *testing.T) string { return testserver.RedisT(t, testserver.RedisOptions{}).Addr() }},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			addr := s.addr(t)
			raw := redistest.GoRedisClient(t, addr)
			for _, c := range redistest.Clients {
				for _, bc := range badCounters {
					t.Run(c.Name+"/"+bc.name, func(t *testing.T) {
						testBadCounter(t, addr, raw, c.New, bc, "bad-"+c.Name+"-"+bc.name)
					})
				}
				t.Run(c.Name+"/long-key", func(t *testing.T) {
					testBadCounter(t, addr, raw, c.New, badCounters[0], strings.Repeat("k", 1000))
				})
			}
		})
	}
}

func testBadCounter(t *testing.T, addr string, raw *goredis.Client, newClient redistest.NewClient, bc badCounter, key string) {
	ctx := context.Background()
	fk := singleredis.FenceKey(key)
	raw.Del(ctx, key, fk)
	if err := bc.spoil(ctx, raw, fk); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, raw, fk)
	ac := &scriptCounter{Client: newClient(t, addr), fenceKey: fk}
	lk, err := singleredis.New(ac, singleredis.Options{Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	unchanged := func(what string) {
		t.Helper()
		if n, _ := raw.Exists(ctx, key).Result(); n != 0 {
			t.Errorf("%s: the lock key was written", what)
		}
		if after := snapshot(t, raw, fk); after != before {
			t.Errorf("%s: counter %s, was %s", what, after, before)
		}
	}

	_, err = lk.TryAcquire(ctx, key)
	checkBadCounterErr(t, "TryAcquire", err, key, bc)
	unchanged("TryAcquire")

	// Acquire with a long context and a retry policy that would poll every
	// millisecond: one attempt, then the error.
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ac.acquires.Store(0)
	start := time.Now()
	_, err = lk.Acquire(actx, key, lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
	took := time.Since(start)
	checkBadCounterErr(t, "Acquire", err, key, bc)
	if actx.Err() != nil || took > 5*time.Second {
		t.Errorf("Acquire returned after %v (context: %v): it waited instead of failing at once", took, actx.Err())
	}
	if n := ac.acquires.Load(); n != 1 {
		t.Errorf("Acquire made %d fenced attempts, want 1: ErrInvalid is not retried", n)
	}
	unchanged("Acquire")

	// The hand-over: a lock held while the counter was good, a waiter of the
	// same Locker, then the counter is spoilt and the lock released.
	raw.Del(ctx, fk)
	held, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	out := queuetest.QueueBehind(t, ctx, lk, key, 10*time.Second)
	raw.Del(ctx, fk)
	if err := bc.spoil(ctx, raw, fk); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, raw, fk)
	if err := held.Release(ctx); err != nil {
		t.Errorf("release handing over to a waiter, bad counter: %v, want nil (our key was deleted)", err)
	}
	select {
	case r := <-out:
		if r.Lock != nil {
			r.Lock.Release(ctx)
		}
		checkBadCounterErr(t, "waiter served by the hand-over", r.Err, key, bc)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not served by the release within 10 s")
	}
	unchanged("hand-over")
}

// TestGuaranteesStateFenceAssumptions: the declared fencing comes with
// what it assumes, and without fencing nothing is said about fences.
func TestGuaranteesStateFenceAssumptions(t *testing.T) {
	notes := strings.Join(singleredis.Guarantees(true).Notes, "\n")
	for _, want := range []string{"2^53", "server's clock", "restart without persistence", "failover", "replica's clock", "lags in data only", "split brain"} {
		if !strings.Contains(notes, want) {
			t.Errorf("fenced notes lack %q:\n%s", want, notes)
		}
	}
	if !singleredis.Guarantees(true).Fencing || singleredis.Guarantees(false).Fencing {
		t.Error("Fencing must follow the option")
	}
	if notes := strings.Join(singleredis.Guarantees(false).Notes, "\n"); strings.Contains(notes, "fence") {
		t.Errorf("unfenced notes speak of fences:\n%s", notes)
	}
}
