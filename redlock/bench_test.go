package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// The benchmarks compare one acquire+release cycle of redlock over N = 1, 3
// and 5 redis-servers with a raw floor of the same client in the same run:
//
//   - redigo floor: one goroutine sends SET NX PX to all N instances on
//     dedicated connections, flushes, reads the N replies, then does the
//     same with EVALSHA compare-and-delete: the least work the protocol can
//     cost.
//   - go-redis floor: go-redis has no split send/receive across clients, so
//     the cheapest raw fan-out is one goroutine per instance but one (the
//     caller serves that one), joined by a WaitGroup.
//
// BenchmarkContended runs 8 goroutines on one key with the same jittered
// retry for floor and lockswap and reports acquisitions per second (acq/s)
// and fairness (fewest ÷ most acquisitions per goroutine).
// Run:
//
//	go test -run '^$' -bench . -benchmem ./redlock/ | tee /tmp/redlock.txt

var (
	benchToken = "0123456789abcdef0123456789abcdef"
	benchTTL   = 10 * time.Second
	benchSHA   = redisscript.CompareAndDelete.SHA() // the release script lockswap runs
)

// runCycle runs newCycle's cycles in shape, each goroutine warming up with
// 4 cycles first, all at once, so that the pools behind lockswap hold their
// connections before timing, as the floors' dedicated connections do.
func runCycle(b *testing.B, shape benchloop.Shape, newCycle func() benchloop.Cycle) {
	benchloop.Loop{Shape: shape, NewCycle: newCycle, Warm: 4}.Bench(b, b.N)
}

// redigoFloor returns a cycle on N dedicated connections, pipelined.
func redigoFloor(b *testing.B, addrs []string) benchloop.Cycle {
	conns := make([]redigo.Conn, len(addrs))
	for i, a := range addrs {
		c, err := redigo.Dial("tcp", a)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		if _, err := c.Do("SCRIPT", "LOAD", redisscript.CompareAndDelete.Source()); err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	quorum := len(addrs)/2 + 1
	ms := benchTTL.Milliseconds()
	return func(ctx context.Context, key string) error {
		for _, c := range conns {
			c.Send("SET", key, benchToken, "NX", "PX", ms)
			c.Flush()
		}
		ok := 0
		for _, c := range conns {
			if v, err := c.Receive(); err == nil && v != nil {
				ok++
			}
		}
		if ok < quorum {
			return fmt.Errorf("floor: %d OK", ok)
		}
		for _, c := range conns {
			c.Send("EVALSHA", benchSHA, 1, key, benchToken)
			c.Flush()
		}
		for _, c := range conns {
			if _, err := c.Receive(); err != nil {
				return err
			}
		}
		return nil
	}
}

// goredisFloor returns the cheapest raw go-redis fan-out.
func goredisFloor(b *testing.B, cs []*goredis.Client) benchloop.Cycle {
	quorum := len(cs)/2 + 1
	return func(ctx context.Context, key string) error {
		var ok atomic.Int32
		var wg sync.WaitGroup
		for _, c := range cs[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if set, err := c.SetNX(ctx, key, benchToken, benchTTL).Result(); err == nil && set {
					ok.Add(1)
				}
			}()
		}
		if set, err := cs[0].SetNX(ctx, key, benchToken, benchTTL).Result(); err == nil && set {
			ok.Add(1)
		}
		wg.Wait()
		if int(ok.Load()) < quorum {
			return fmt.Errorf("floor: %d OK", ok.Load())
		}
		for _, c := range cs[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.EvalSha(ctx, benchSHA, []string{key}, benchToken)
			}()
		}
		err := cs[0].EvalSha(ctx, benchSHA, []string{key}, benchToken).Err()
		wg.Wait()
		return err
	}
}

func benchServers(b *testing.B, n int) []string {
	srvs := testserver.RedisClusterOfMasters(b, n)
	addrs := make([]string, n)
	for i, s := range srvs {
		addrs[i] = s.Addr()
		c := redistest.GoRedisClient(b, s.Addr())
		if err := c.ScriptLoad(context.Background(), redisscript.CompareAndDelete.Source()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return addrs
}

// benchLocker makes a Locker for the benchmarks. Its instance timeout is
// 1 s rather than the default TTL/100 (50 ms for the 10 s TTL here): the
// timeout costs nothing on the happy path, and on a shared, loaded machine
// a 50 ms stall would turn into a failed benchmark.
func benchLocker(b *testing.B, addrs []string, newClient redistest.NewClient, opts redlock.Options) *redlock.Locker {
	if opts.InstanceTimeout == 0 {
		opts.InstanceTimeout = time.Second
	}
	cs := make([]redisclient.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = newClient(b, a)
	}
	lk, err := redlock.New(cs, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	return lk
}

func BenchmarkCycle(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		addrs := benchServers(b, n)
		grs := make([]*goredis.Client, n)
		for i, a := range addrs {
			grs[i] = redistest.GoRedisClient(b, a)
		}
		grLocker := benchLocker(b, addrs, redistest.GoRedis, redlock.Options{})
		rgLocker := benchLocker(b, addrs, redistest.Redigo, redlock.Options{})
		for _, shape := range benchloop.Uncontended {
			name := fmt.Sprintf("N=%d/%s", n, shape.Name)
			b.Run("redigo/"+name+"/floor", func(b *testing.B) {
				runCycle(b, shape, func() benchloop.Cycle { return redigoFloor(b, addrs) })
			})
			b.Run("redigo/"+name+"/lockswap", func(b *testing.B) {
				runCycle(b, shape, func() benchloop.Cycle { return benchloop.TryCycle(rgLocker, benchTTL) })
			})
			b.Run("goredis/"+name+"/floor", func(b *testing.B) {
				runCycle(b, shape, func() benchloop.Cycle { return goredisFloor(b, grs) })
			})
			b.Run("goredis/"+name+"/lockswap", func(b *testing.B) {
				runCycle(b, shape, func() benchloop.Cycle { return benchloop.TryCycle(grLocker, benchTTL) })
			})
		}
	}
}

// BenchmarkRestartSafety measures the cost of RestartSafety (the acquire
// script instead of a plain SET) on 3 instances, serially.
func BenchmarkRestartSafety(b *testing.B) {
	addrs := benchServers(b, 3)
	for _, safe := range []bool{false, true} {
		lk := benchLocker(b, addrs, redistest.GoRedis, redlock.Options{RestartSafety: safe, MaxTTL: benchTTL})
		if safe {
			// Let the fresh instances' epochs age past MaxTTL without
			// waiting: write epochs that are old enough.
			for _, a := range addrs {
				c := redistest.GoRedisClient(b, a)
				c.Set(context.Background(), redlock.EpochKey, fmt.Sprintf("%d.0.bench", time.Now().Add(-time.Hour).Unix()), 0)
			}
		}
		b.Run(fmt.Sprintf("goredis/N=3/RestartSafety=%v", safe), func(b *testing.B) {
			runCycle(b, benchloop.Serial, func() benchloop.Cycle { return benchloop.TryCycle(lk, benchTTL) })
		})
	}
}

// BenchmarkContended: 8 goroutines compete for one key; each success is an
// acquire+release. The floor retries after the same random delay.
func BenchmarkContended(b *testing.B) {
	retry := lockswap.JitterRetry(500*time.Microsecond, 2*time.Millisecond)
	for _, n := range []int{1, 3, 5} {
		addrs := benchServers(b, n)
		grs := make([]*goredis.Client, n)
		for i, a := range addrs {
			grs[i] = redistest.GoRedisClient(b, a)
		}
		grLocker := benchLocker(b, addrs, redistest.GoRedis, redlock.Options{Retry: retry})
		rgLocker := benchLocker(b, addrs, redistest.Redigo, redlock.Options{Retry: retry})
		floor := func(newFloor func() benchloop.Cycle) func(b *testing.B) {
			return func(b *testing.B) {
				runContended(b, func() benchloop.Cycle {
					cycle := newFloor()
					return func(ctx context.Context, key string) error {
						for cycle(ctx, key) != nil {
							d, _ := retry.NextDelay(1)
							time.Sleep(d)
						}
						return nil
					}
				})
			}
		}
		ours := func(lk *redlock.Locker) func(b *testing.B) {
			return func(b *testing.B) {
				runContended(b, func() benchloop.Cycle { return benchloop.AcquireCycle(lk, benchTTL) })
			}
		}
		b.Run(fmt.Sprintf("redigo/N=%d/floor", n), floor(func() benchloop.Cycle { return contendedRedigoFloor(b, addrs) }))
		b.Run(fmt.Sprintf("redigo/N=%d/lockswap", n), ours(rgLocker))
		b.Run(fmt.Sprintf("goredis/N=%d/floor", n), floor(func() benchloop.Cycle { return contendedGoredisFloor(grs) }))
		b.Run(fmt.Sprintf("goredis/N=%d/lockswap", n), ours(grLocker))
	}
}

// runContended runs 8 goroutines on one key and reports acquisitions per
// second and fairness.
func runContended(b *testing.B, newCycle func() benchloop.Cycle) {
	benchloop.Loop{Shape: benchloop.Contended(8), NewCycle: newCycle}.Bench(b, b.N)
}

// contendedRedigoFloor is redigoFloor with a random token per attempt and
// the undo of a failed attempt, as the protocol needs under contention.
func contendedRedigoFloor(b *testing.B, addrs []string) benchloop.Cycle {
	conns := make([]redigo.Conn, len(addrs))
	for i, a := range addrs {
		c, err := redigo.Dial("tcp", a)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	quorum := len(addrs)/2 + 1
	ms := benchTTL.Milliseconds()
	return func(ctx context.Context, key string) error {
		token := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
		for _, c := range conns {
			c.Send("SET", key, token, "NX", "PX", ms)
			c.Flush()
		}
		ok := 0
		for _, c := range conns {
			if v, err := c.Receive(); err == nil && v != nil {
				ok++
			}
		}
		for _, c := range conns {
			c.Send("EVALSHA", benchSHA, 1, key, token)
			c.Flush()
		}
		for _, c := range conns {
			c.Receive()
		}
		if ok < quorum {
			return fmt.Errorf("floor: %d OK", ok)
		}
		return nil
	}
}

func contendedGoredisFloor(cs []*goredis.Client) benchloop.Cycle {
	quorum := len(cs)/2 + 1
	return func(ctx context.Context, key string) error {
		token := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
		var ok atomic.Int32
		var wg sync.WaitGroup
		each := func(f func(c *goredis.Client)) {
			for _, c := range cs[1:] {
				wg.Add(1)
				go func() { defer wg.Done(); f(c) }()
			}
			f(cs[0])
			wg.Wait()
		}
		each(func(c *goredis.Client) {
			if set, err := c.SetNX(ctx, key, token, benchTTL).Result(); err == nil && set {
				ok.Add(1)
			}
		})
		each(func(c *goredis.Client) { c.EvalSha(ctx, benchSHA, []string{key}, token) })
		if int(ok.Load()) < quorum {
			return fmt.Errorf("floor: %d OK", ok.Load())
		}
		return nil
	}
}

// BenchmarkCyclePaired measures the serial cycle of the floor and of
// lockswap in alternating blocks of 16 cycles within one benchmark, and
// reports each one's ns per cycle and their ratio. On a shared machine the
// serial round trip switches between latency modes (a wake-up of 20 µs or
// of 100+ µs) for seconds at a time, so that two sub-benchmarks run one
// after the other can land in different modes; alternating puts both in
// the same ones. Run:
//
//	go test -run '^$' -bench CyclePaired -benchtime=6000x ./redlock/
func BenchmarkCyclePaired(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		addrs := benchServers(b, n)
		grs := make([]*goredis.Client, n)
		for i, a := range addrs {
			grs[i] = redistest.GoRedisClient(b, a)
		}
		for _, c := range []struct {
			name   string
			floor  func(b *testing.B) benchloop.Cycle
			locker *redlock.Locker
		}{
			{"redigo", func(b *testing.B) benchloop.Cycle { return redigoFloor(b, addrs) }, benchLocker(b, addrs, redistest.Redigo, redlock.Options{})},
			{"goredis", func(*testing.B) benchloop.Cycle { return goredisFloor(b, grs) }, benchLocker(b, addrs, redistest.GoRedis, redlock.Options{})},
		} {
			b.Run(fmt.Sprintf("%s/N=%d", c.name, n), func(b *testing.B) {
				benchloop.Paired(b, b.N, benchloop.Pair{Base: c.floor(b), Ours: benchloop.TryCycle(c.locker, benchTTL), BaseName: "floor"})
			})
		}
	}
}

// BenchmarkClientsPaired compares the client libraries under Redlock at
// N = 3 and 5, serially, in alternating blocks as BenchmarkCyclePaired
// does: redigo and rueidis (through lsrueidis.NewClient, as the docs
// recommend), each paired with go-redis with ContextTimeoutEnabled (the
// default client=), "ratio" being the other's time per cycle ÷
// go-redis's; and rueidis as redlock uses it (redisclient.Grouper: the
// group commit, whose adapter is also a redisclient.Splitter that
// pipelines a round) paired with the adapter of another client of the
// same kind seen without Grouper (redlock then sends each instance's
// command through its fan-out), "ratio" being grouped ÷ ungrouped: the
// serial price of the group commit and its split path.
// Run:
//
//	go test -run '^$' -bench ClientsPaired -benchtime=3000x -count 5 ./redlock/
func BenchmarkClientsPaired(b *testing.B) {
	for _, n := range []int{3, 5} {
		addrs := benchServers(b, n)
		goredisCycle := benchloop.TryCycle(benchLocker(b, addrs, redistest.GoRedis, redlock.Options{}), benchTTL)
		ungrouped := func(t testing.TB, addr string) redisclient.Client {
			a := redistest.RueidisFast(t, addr)
			// Only the methods of Client and SetGetter: redlock sees no
			// Grouper, and uses the adapter as it is.
			return struct {
				redisclient.Client
				redisclient.SetGetter
			}{a, a.(redisclient.SetGetter)}
		}
		for _, c := range []struct {
			name, base string
			baseCycle  benchloop.Cycle
			newClient  redistest.NewClient
		}{
			{"redigo", "goredis", goredisCycle, redistest.Redigo},
			{"rueidis", "goredis", goredisCycle, redistest.RueidisFast},
			{"rueidis-grouped", "ungrouped",
				benchloop.TryCycle(benchLocker(b, addrs, ungrouped, redlock.Options{}), benchTTL), redistest.RueidisFast},
		} {
			ours := benchloop.TryCycle(benchLocker(b, addrs, c.newClient, redlock.Options{}), benchTTL)
			b.Run(fmt.Sprintf("%s/N=%d", c.name, n), func(b *testing.B) {
				benchloop.Paired(b, b.N, benchloop.Pair{Base: c.baseCycle, Ours: ours, BaseName: c.base, OursName: c.name})
			})
		}
	}
}

// fenceBenchClients are the clients the fencing benchmarks run on.
var fenceBenchClients = []struct {
	name string
	new  redistest.NewClient
}{{"redigo", redistest.Redigo}, {"goredis", redistest.GoRedis}, {"rueidis", redistest.Rueidis}}

// BenchmarkFencePaired measures the cost of Options.Fence on the serial
// cycle (TryAcquire + Release) against the same Locker without it, in
// alternating blocks (benchloop.Paired, median of the blocks):
// "lockswap-ns/cycle" is the fenced Locker's, and "ratio" is fenced ÷
// unfenced ns per cycle. A key's first fenced acquisition is one more
// round trip (the write-back) and a script instead of a plain SET; a key
// taken before is the script alone (the guess applies). With fewer cycles
// than benchloop.KeyRing every key is new; with many more, few are. Run:
//
//	go test -run '^$' -bench FencePaired -benchtime=1000x -count=6 ./redlock/   # new keys
//	go test -run '^$' -bench FencePaired -benchtime=16000x -count=6 ./redlock/  # keys taken before
func BenchmarkFencePaired(b *testing.B) {
	for _, n := range []int{3, 5} {
		addrs := benchServers(b, n)
		for _, c := range fenceBenchClients {
			plain := benchLocker(b, addrs, c.new, redlock.Options{})
			fenced := benchLocker(b, addrs, c.new, redlock.Options{Fence: true})
			b.Run(fmt.Sprintf("%s/N=%d", c.name, n), func(b *testing.B) {
				benchloop.Paired(b, b.N, benchloop.Pair{Base: benchloop.TryCycle(plain, benchTTL), Ours: benchloop.TryCycle(fenced, benchTTL),
					BaseName: "unfenced", Median: true})
			})
		}
	}
}

// BenchmarkFenceAlternating measures the cost of Options.Fence when two
// Lockers (two processes, as most deployments run) take the same keys in
// turn: each cycle is TryAcquire + Release by one Locker, then the other,
// fenced against unfenced in alternating blocks (benchloop.Paired, median
// of the blocks). "ring" cycles through benchloop.KeyRing keys, each taken
// once before the timed cycles (no key is new: a new key's first fence
// takes the write-back round), "onekey" hands one key back and forth;
// every key is taken by the two Lockers in turn. Each fenced Locker
// guesses the fence from its clock above the other's last fence, so both
// stay on the one-round path; the Lockers share this host's clock (skew
// 0). Run:
//
//	go test -run '^$' -bench FenceAlternating -benchtime=4000x -count=6 ./redlock/
func BenchmarkFenceAlternating(b *testing.B) {
	for _, n := range []int{3, 5} {
		addrs := benchServers(b, n)
		for _, c := range fenceBenchClients {
			alternate := func(opts redlock.Options) benchloop.Cycle {
				lks := [2]benchloop.Cycle{
					benchloop.TryCycle(benchLocker(b, addrs, c.new, opts), benchTTL),
					benchloop.TryCycle(benchLocker(b, addrs, c.new, opts), benchTTL),
				}
				turns := map[string]int{} // per key, so that every key alternates
				return func(ctx context.Context, key string) error {
					turns[key]++
					return lks[turns[key]&1](ctx, key)
				}
			}
			plain, fenced := alternate(redlock.Options{}), alternate(redlock.Options{Fence: true})
			for _, oneKey := range []bool{false, true} {
				shape := "ring"
				if oneKey {
					shape = "onekey"
				}
				b.Run(fmt.Sprintf("%s/N=%d/%s", c.name, n, shape), func(b *testing.B) {
					benchloop.Paired(b, b.N, benchloop.Pair{Base: plain, Ours: fenced, BaseName: "unfenced", Median: true, OneKey: oneKey, WarmAll: true})
				})
			}
		}
	}
}

// BenchmarkFenceContended measures the throughput of 8 goroutines on one
// key (Acquire + Release, the retry of BenchmarkContended) with and without
// Options.Fence, in alternating runs of 500 ms, 6 of each per iteration
// (so that both meet the same load on a shared machine), and reports each
// one's acquisitions per second and "ratio", fenced ÷ unfenced. Run:
//
//	go test -run '^$' -bench FenceContended -benchtime=1x -count=3 ./redlock/
func BenchmarkFenceContended(b *testing.B) {
	retry := lockswap.JitterRetry(500*time.Microsecond, 2*time.Millisecond)
	for _, n := range []int{3, 5} {
		addrs := benchServers(b, n)
		for _, c := range []struct {
			name string
			new  redistest.NewClient
		}{{"redigo", redistest.Redigo}, {"goredis", redistest.GoRedis}} {
			lks := [2]*redlock.Locker{
				benchLocker(b, addrs, c.new, redlock.Options{Retry: retry}),
				benchLocker(b, addrs, c.new, redlock.Options{Retry: retry, Fence: true}),
			}
			b.Run(fmt.Sprintf("%s/N=%d", c.name, n), func(b *testing.B) {
				var ops [2]int
				var spent [2]time.Duration
				for range b.N {
					for range 6 {
						for w, lk := range lks {
							r, err := benchloop.Loop{Shape: benchloop.Contended(8), Warm: 2,
								NewCycle: func() benchloop.Cycle { return benchloop.AcquireCycle(lk, benchTTL) }}.
								For(context.Background(), 500*time.Millisecond, time.Second)
							if err != nil {
								b.Fatal(err)
							}
							ops[w] += r.Ops
							spent[w] += r.Elapsed
						}
					}
				}
				plain, fenced := float64(ops[0])/spent[0].Seconds(), float64(ops[1])/spent[1].Seconds()
				b.ReportMetric(plain, "unfenced-acq/s")
				b.ReportMetric(fenced, "fenced-acq/s")
				b.ReportMetric(fenced/plain, "ratio")
			})
		}
	}
}
