package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// fenceOf returns l's fence, failing the test when it has none.
func fenceOf(t testing.TB, l lockswap.Lock) uint64 {
	t.Helper()
	f, ok := l.Fence()
	if !ok || f == 0 {
		t.Fatalf("fenced lock: Fence() = %d, %v; want a fence", f, ok)
	}
	return f
}

// counters reads the fence counter of key on every instance ("" where
// missing), checking that each expires within FenceCounterTTL (every
// write sets its expiry).
func counters(t *testing.T, raws []*goredis.Client, key string) []string {
	t.Helper()
	ctx := context.Background()
	out := make([]string, len(raws))
	for i, rc := range raws {
		v, err := rc.Get(ctx, redlock.FenceKey(key)).Result()
		if errors.Is(err, goredis.Nil) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if ttl, err := rc.PTTL(ctx, redlock.FenceKey(key)).Result(); err != nil || ttl <= 0 || ttl > redlock.FenceCounterTTL {
			t.Fatalf("instance %d: the fence counter has PTTL %v, %v; want an expiry within FenceCounterTTL (%v)", i, ttl, err, redlock.FenceCounterTTL)
		}
		out[i] = v
	}
	return out
}

func rawClients(t *testing.T, addrs []string) []*goredis.Client {
	raws := make([]*goredis.Client, len(addrs))
	for i, a := range addrs {
		raws[i] = redistest.GoRedisClient(t, a)
	}
	return raws
}

// TestFenceSequential: on 3 and 5 masters, with every client, with and
// without RestartSafety, each acquisition of a key gets a fence above the
// last one; a majority of the counters hold it afterwards, expiring within
// FenceCounterTTL;
// Extend keeps the fence; Release and Extend leave the counters alone; an
// unfenced Locker's locks have no fence.
func TestFenceSequential(t *testing.T) {
	for _, n := range []int{3, 5} {
		addrs, _ := realN(t, n)
		raws := rawClients(t, addrs)
		for _, c := range redistest.Clients {
			for _, rs := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d/%s/restart_safety=%v", n, c.Name, rs), func(t *testing.T) {
					ctx := ctxT(t)
					opts := redlock.Options{Prefix: "fseq:", Fence: true, InstanceTimeout: adaptiveTimeout}
					if rs {
						opts.RestartSafety, opts.MaxTTL = true, 10*time.Second
						// A fresh instance's votes wait MaxTTL: give these
						// instances an epoch old enough.
						seedOldEpoch(t, raws)
					}
					lk := newLocker(t, addrs, c.New, opts)
					key := fmt.Sprintf("k-%s-%v", c.Name, rs)
					var last uint64
					for i := range 20 {
						l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(5*time.Second))
						if err != nil {
							t.Fatalf("acquisition %d: %v", i, err)
						}
						f := fenceOf(t, l)
						if f <= last {
							t.Fatalf("acquisition %d: fence %d after %d: want it to grow", i, f, last)
						}
						last = f
						want := strconv.FormatUint(f, 10)
						before := counters(t, raws, "fseq:"+key)
						if got := countEqual(before, want); got < lk.Quorum() {
							t.Fatalf("acquisition %d: fence %d is on %d counters (%q), want a majority", i, f, got, before)
						}
						if i%5 == 0 {
							if err := l.Extend(ctx, 5*time.Second); err != nil {
								t.Fatal(err)
							}
							if g := fenceOf(t, l); g != f {
								t.Fatalf("Extend changed the fence from %d to %d", f, g)
							}
						}
						if err := l.Release(ctx); err != nil {
							t.Fatal(err)
						}
						if after := counters(t, raws, "fseq:"+key); !slices.Equal(after, before) {
							t.Fatalf("Release or Extend changed the counters from %q to %q", before, after)
						}
					}
				})
			}
		}
	}
	t.Run("unfenced", func(t *testing.T) {
		addrs, _ := realN(t, 3)
		lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{})
		l, err := lk.TryAcquire(ctxT(t), "k")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
		if f, ok := l.Fence(); ok || f != 0 {
			t.Fatalf("unfenced Locker: Fence() = %d, %v; want 0, false", f, ok)
		}
		if got := counters(t, rawClients(t, addrs), "k"); !slices.Equal(got, make([]string, 3)) {
			t.Fatalf("unfenced Locker wrote fence counters: %q", got)
		}
	})
}

func countEqual(vs []string, want string) int {
	n := 0
	for _, v := range vs {
		if v == want {
			n++
		}
	}
	return n
}

// seedOldEpoch gives every instance an epoch made long ago, so that a
// RestartSafety Locker counts their votes at once (they have been up, as
// far as it knows, for longer than any MaxTTL).
func seedOldEpoch(t *testing.T, raws []*goredis.Client) {
	t.Helper()
	for _, rc := range raws {
		if err := rc.SetNX(context.Background(), redlock.EpochKey, "1.0.seeded-by-test", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFenceBadCounter: a fence counter that is not a non-negative integer
// below 2^53 − 1, or is another Redis type, on a majority makes the
// acquisition fail with ErrInvalid naming the counter, and nothing is
// written on any instance; on a minority the lock is granted around it and
// the bad counter is left as it was.
func TestFenceBadCounter(t *testing.T) {
	addrs, _ := realN(t, 3)
	raws := rawClients(t, addrs)
	ctx := ctxT(t)
	bad := []struct {
		name string
		set  func(rc *goredis.Client, k string) error
		want string
	}{
		{"hash", func(rc *goredis.Client, k string) error { return rc.HSet(ctx, k, "f", "1").Err() }, "another Redis type"},
		{"not a number", func(rc *goredis.Client, k string) error { return rc.Set(ctx, k, "twelve", 0).Err() }, "non-negative integer"},
		{"negative", func(rc *goredis.Client, k string) error { return rc.Set(ctx, k, "-5", 0).Err() }, "non-negative integer"},
		{"2^53-1", func(rc *goredis.Client, k string) error { return rc.Set(ctx, k, "9007199254740991", 0).Err() }, "too high"},
		{"huge", func(rc *goredis.Client, k string) error {
			return rc.Set(ctx, k, strings.Repeat("9", 400), 0).Err()
		}, "too high"},
	}
	for _, rs := range []bool{false, true} {
		for _, c := range redistest.Clients {
			for _, b := range bad {
				t.Run(fmt.Sprintf("%s/%s/restart_safety=%v", b.name, c.Name, rs), func(t *testing.T) {
					for _, rc := range raws {
						rc.FlushAll(ctx)
					}
					opts := redlock.Options{Fence: true}
					if rs {
						opts.RestartSafety, opts.MaxTTL = true, 10*time.Second
						seedOldEpoch(t, raws)
					}
					lk := newLocker(t, addrs, c.New, opts)
					redlock.RegisterMembers(t, lk) // as its first acquisition would
					for _, rc := range raws {
						if err := b.set(rc, redlock.FenceKey("k")); err != nil {
							t.Fatal(err)
						}
					}
					before := dumpSnapshot(t, raws)
					_, err := lk.TryAcquire(ctx, "k")
					if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), "fence counter") {
						t.Fatalf("bad counter on every instance: err = %v; want ErrInvalid naming the fence counter (%q)", err, b.want)
					}
					if after := dumpSnapshot(t, raws); !slices.Equal(after, before) {
						t.Fatalf("a refused acquisition wrote:\nbefore %q\nafter  %q", before, after)
					}
					// On one instance only: granted by the other two.
					for _, rc := range raws[1:] {
						rc.Del(ctx, redlock.FenceKey("k"))
					}
					l, err := lk.TryAcquire(ctx, "k")
					if err != nil {
						t.Fatalf("bad counter on 1 of 3 instances: %v", err)
					}
					fenceOf(t, l)
					l.Release(ctx)
					if got := dumpSnapshot(t, raws[:1]); !slices.Equal(got, before[:len(got)]) {
						t.Fatalf("the bad counter's instance changed: %q, was %q", got, before)
					}
				})
			}
		}
	}
}

// TestFenceURL: fence=true in a redlock URL gives fenced locks and
// Guarantees with fencing; a bad value is refused.
func TestFenceURL(t *testing.T) {
	addrs, _ := realN(t, 3)
	ctx := ctxT(t)
	for _, q := range []string{"fence=true", "fence=true&restart_safety=true&max_ttl=10s"} {
		lk, err := backend.OpenURL(ctx, "redlock://"+strings.Join(addrs, ",")+"?"+q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if g := lk.Guarantees(); !g.Fencing || !strings.Contains(strings.Join(g.Notes, "\n"), "clock") {
			t.Errorf("%s: Guarantees %+v: want fencing with its clock assumption", q, g)
		}
		if strings.Contains(q, "restart") {
			seedOldEpoch(t, rawClients(t, addrs))
		}
		// Acquire, not TryAcquire: the URL's instance timeout is the
		// default 50 ms, which a first dial on a loaded machine can miss.
		l, err := lk.Acquire(ctx, "url")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		fenceOf(t, l)
		l.Release(ctx)
		lk.Close()
	}
	if _, err := backend.OpenURL(ctx, "redlock://"+strings.Join(addrs, ",")+"?fence=maybe"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "fence") {
		t.Fatalf("fence=maybe: %v, want ErrInvalid naming fence", err)
	}
	if g := redlock.Guarantees(3, true); g.Fencing {
		t.Errorf("Guarantees without Fence declare fencing")
	}
}

// acquisition is one successful Acquire: when it started and returned
// (wall clock, comparable across processes of one machine) and its fence.
type acquisition struct {
	start, end int64
	fence      uint64
	who        string
}

// fenceViolation checks the two fencing properties over acqs: no fence is
// given twice, and an acquisition that started after another returned has
// a larger fence. It returns the first violation found, or nil.
func fenceViolation(acqs []acquisition) error {
	seen := make(map[uint64]acquisition, len(acqs))
	for _, a := range acqs {
		if b, dup := seen[a.fence]; dup {
			return fmt.Errorf("fence %d given twice: to %s (%d–%d) and %s (%d–%d)", a.fence, b.who, b.start, b.end, a.who, a.start, a.end)
		}
		seen[a.fence] = a
	}
	byEnd := slices.Clone(acqs)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
	// top[i] is the acquisition of the largest fence among byEnd[:i+1].
	top := make([]acquisition, len(byEnd))
	for i, a := range byEnd {
		top[i] = a
		if i > 0 && top[i-1].fence > a.fence {
			top[i] = top[i-1]
		}
	}
	for _, b := range acqs {
		// The acquisitions that returned before b started.
		k := sort.Search(len(byEnd), func(i int) bool { return byEnd[i].end >= b.start })
		if k > 0 && top[k-1].fence >= b.fence {
			a := top[k-1]
			return fmt.Errorf("%s's acquisition (%d–%d) got fence %d, not above the fence %d of %s's, which returned (%d) before it started",
				b.who, b.start, b.end, b.fence, a.fence, a.who, a.end)
		}
	}
	return nil
}

// TestFenceViolation: the checker finds a repeated fence and an order
// violation, and accepts overlapping acquisitions in either order.
func TestFenceViolation(t *testing.T) {
	for name, c := range map[string]struct {
		acqs []acquisition
		bad  bool
	}{
		"in order":           {[]acquisition{{1, 2, 10, "a"}, {3, 4, 11, "b"}, {3, 5, 12, "c"}}, false},
		"overlapping":        {[]acquisition{{1, 5, 10, "a"}, {2, 6, 9, "b"}}, false},
		"repeat":             {[]acquisition{{1, 2, 10, "a"}, {1, 3, 10, "b"}}, true},
		"out of order":       {[]acquisition{{1, 2, 10, "a"}, {3, 4, 9, "b"}}, true},
		"below an older one": {[]acquisition{{1, 2, 10, "a"}, {1, 3, 5, "b"}, {4, 6, 8, "c"}}, true},
	} {
		if err := fenceViolation(c.acqs); (err != nil) != c.bad {
			t.Errorf("%s: fenceViolation(%v) = %v, want a violation: %v", name, c.acqs, err, c.bad)
		}
	}
}

// TestFenceFastPath: a fenced Locker takes a key it has never seen in two
// requests per instance: the instances seed the missing counter at their
// clock plus 20 ms (redisscript.FenceGuessAhead), above any guess they
// accept, and the write-back round installs the highest plus one. Every
// later acquisition is one round: the same Locker guesses its last fence
// plus one, or its clock plus 15 ms once that is higher; another Locker,
// with no hint for the key, guesses from its clock as soon as that is
// past the last fence (at most 20 ms ahead of the clock that issued it),
// and the first Locker again after it, from its clock too: Lockers that
// take a key in turn stay on the one-round path.
func TestFenceFastPath(t *testing.T) {
	addrs, _ := realN(t, 3)
	raws := rawClients(t, addrs)
	ctx := ctxT(t)
	type locker struct {
		*redlock.Locker
		ccs []*countingClient
	}
	newCounting := func() locker {
		lk, ccs := countingLocker(t, addrs, redlock.Options{Fence: true})
		return locker{lk, ccs}
	}
	lk, other := newCounting(), newCounting()
	cycle := func(lk locker, key string) (fence uint64, reqs int64) {
		t.Helper()
		requests := func() (n int64) {
			for _, c := range lk.ccs {
				n += c.splits.Load() + c.direct.Load()
			}
			return n
		}
		before := requests()
		l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		reqs = requests() - before
		fence = fenceOf(t, l)
		if n := countEqual(counters(t, raws, key), strconv.FormatUint(fence, 10)); n < lk.Quorum() {
			t.Fatalf("fence %d is on %d counters, want a majority", fence, n)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return fence, reqs
	}
	n := int64(len(addrs))
	ahead := redisscript.FenceGuessAhead * time.Microsecond
	key := "fastpath"
	from := uint64(time.Now().Add(ahead).UnixMicro())
	prev, r := cycle(lk, key)
	to := uint64(time.Now().Add(ahead).UnixMicro()) + 1
	if prev < from || prev > to || r != 2*n {
		t.Fatalf("new key: fence %d in %d requests, want the seed (clock + %v in µs) plus one, in [%d, %d], in %d (the write-back round)", prev, r, ahead, from, to, 2*n)
	}
	for i := range 3 {
		f, r := cycle(lk, key)
		if r != n || f <= prev || f > uint64(time.Now().Add(ahead).UnixMicro()) {
			t.Errorf("acquisition %d: fence %d in %d requests, want above %d and at most the clock + %v, in %d (the guess applied in the acquire round)", i+2, f, r, prev, ahead, n)
		}
		prev = f
	}
	// The other Locker's first guess is its clock + 15 ms: wait until that
	// is past the last fence (at most 20 ms ahead of the clock).
	waitClock(t, prev-uint64(ahead-5*time.Millisecond)/1000)
	fo, r := cycle(other, key)
	if fo <= prev || r != n {
		t.Fatalf("the other Locker: fence %d in %d requests, want above %d in %d (its guess from the clock applied)", fo, r, prev, n)
	}
	// The first Locker's hint (prev) is below the counters now; its guess
	// from the clock is above them, since its clock has moved on.
	f, r := cycle(lk, key)
	if f <= fo || r != n {
		t.Errorf("after another Locker's acquisition: fence %d in %d requests, want above %d in %d (the guess from the clock applied)", f, r, fo, n)
	}
}

// waitClock waits, bounded, until this host's clock in µs is past us.
func waitClock(t *testing.T, us uint64) {
	t.Helper()
	until := time.Now().Add(time.Second)
	for uint64(time.Now().UnixMicro()) <= us {
		if time.Now().After(until) {
			t.Fatalf("the clock is not past %d within a second", us)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFenceGuessBounded: a Locker whose clock is far off still gets fences
// that keep both properties, the first in two rounds: a clock a minute
// behind guesses below the counters the instances seed, and a clock a
// minute ahead guesses more than redisscript.FenceGuessAhead above the
// servers' clocks, which the acquire script refuses (the next acquisition
// guesses the last fence plus one alone, in one round), so that no counter
// is pushed ahead of the servers' clocks (the seed of a lost counter
// relies on that).
func TestFenceGuessBounded(t *testing.T) {
	addrs, _ := realN(t, 3)
	raws := rawClients(t, addrs)
	ctx := ctxT(t)
	var last uint64
	for _, off := range []time.Duration{-time.Minute, time.Minute} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			lk, ccs := countingLocker(t, addrs, redlock.Options{Fence: true})
			redlock.SetGuessClock(lk, func() time.Time { return time.Now().Add(off) })
			key := "guess-bounded"
			for i := range 2 {
				var before int64
				for _, c := range ccs {
					before += c.splits.Load() + c.direct.Load()
				}
				l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(5*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				var reqs int64
				for _, c := range ccs {
					reqs += c.splits.Load() + c.direct.Load()
				}
				reqs -= before
				f := fenceOf(t, l)
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if f <= last {
					t.Fatalf("fence %d after %d", f, last)
				}
				last = f
				if i == 0 && reqs != 2*int64(len(addrs)) {
					t.Errorf("first acquisition with the clock %v off: %d requests, want %d (the guess refused, the write-back round)", off, reqs, 2*len(addrs))
				}
				if i == 1 && reqs != int64(len(addrs)) {
					t.Errorf("second acquisition with the clock %v off: %d requests, want %d (the guess of the last fence plus one applied)", off, reqs, len(addrs))
				}
				limit := uint64(time.Now().Add(20 * time.Millisecond).UnixMicro())
				for j, c := range counters(t, raws, key) {
					if v, _ := strconv.ParseUint(c, 10, 64); v > limit {
						t.Fatalf("instance %d: counter %d, above the clock + 20 ms (%d)", j, v, limit)
					}
				}
			}
		})
	}
}

// countedGoRedisLocker returns a Locker over go-redis clients of addrs and
// a function that counts the requests they have sent (one per instance per
// round: the adapter's workers, no pipelined fan-out).
func countedGoRedisLocker(t *testing.T, addrs []string, opts redlock.Options) (*redlock.Locker, func() int64) {
	t.Helper()
	cs := make([]redisclient.Client, len(addrs))
	dcs := make([]*redistest.Counting, len(addrs))
	for i, a := range addrs {
		dcs[i] = &redistest.Counting{Client: redistest.GoRedis(t, a)}
		cs[i] = dcs[i]
	}
	lk, err := redlock.New(cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	if opts.Fence {
		redlock.RegisterMembers(t, lk)
	}
	return lk, func() (n int64) {
		for _, c := range dcs {
			n += c.Requests()
		}
		return n
	}
}

// TestFencedHandOver: with Fence, a release with a local waiter hands the
// key over in one request per instance, the waiter's fence included: the
// hand-over script applies the fence the Locker guesses (the holder's plus
// one, or from the clock) where it sets the key, so no write-back round
// follows (the fast path), on both fan-out paths; the waiter's fence is
// above the holder's and is on a majority of the counters.
func TestFencedHandOver(t *testing.T) {
	addrs, _ := realN(t, 3)
	raws := rawClients(t, addrs)
	pipelined := func(t *testing.T) (*redlock.Locker, func() int64) {
		lk, ccs := countingLocker(t, addrs, redlock.Options{Fence: true})
		return lk, func() (n int64) {
			for _, c := range ccs {
				n += c.splits.Load() + c.direct.Load()
			}
			return n
		}
	}
	direct := func(t *testing.T) (*redlock.Locker, func() int64) {
		return countedGoRedisLocker(t, addrs, redlock.Options{InstanceTimeout: countedTimeout, Fence: true})
	}
	for name, mk := range map[string]func(*testing.T) (*redlock.Locker, func() int64){"redigo-pipelined": pipelined, "goredis-workers": direct} {
		t.Run(name, func(t *testing.T) {
			ctx, key := ctxT(t), "fencedhandover:"+name
			lk, requests := mk(t)
			held, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			out := queuetest.QueueBehind(t, ctx, lk, key, 7*time.Second)
			before := requests()
			if err := held.Release(ctx); err != nil {
				t.Fatalf("release with a waiter: %v", err)
			}
			got := <-out
			if got.Err != nil {
				t.Fatalf("waiter: %v", got.Err)
			}
			if n := requests() - before; n != int64(len(addrs)) {
				t.Errorf("%d requests for the release and the waiter's acquisition, want %d (the hand-over on each instance)", n, len(addrs))
			}
			f, g := fenceOf(t, held), fenceOf(t, got.Lock)
			// The guess: the holder's fence plus one, or the clock + 15 ms
			// once that is higher (the hand-over came more than about
			// 5 ms after the holder's fence: a loaded machine).
			if g <= f || g > uint64(time.Now().Add(redisscript.FenceGuessAhead*time.Microsecond).UnixMicro()) {
				t.Fatalf("the waiter's fence is %d, want above the holder's %d and at most the clock + 20 ms (the guess)", g, f)
			}
			if n := countEqual(counters(t, raws, key), strconv.FormatUint(g, 10)); n < lk.Quorum() {
				t.Fatalf("the waiter's fence %d is on %d counters, want a majority", g, n)
			}
			for i, c := range raws {
				if v, _ := c.Get(ctx, key).Result(); v != got.Lock.Token() {
					t.Errorf("instance %d holds %q, want the waiter's token", i, v)
				}
			}
			if err := got.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
