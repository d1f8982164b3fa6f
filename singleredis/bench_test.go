package singleredis_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	goredislib "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	lsrueidis "github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/singleredis"
)

// The benchmarks compare one acquire+release cycle of singleredis with the
// raw floor of the same client in the same run: SET key token NX PX ttl,
// then EVALSHA compare-and-delete. Run:
//
//	go test -run '^$' -bench . -benchmem -count 5 ./singleredis/ | tee /tmp/sr.txt
//
// and compare each BenchmarkCycle/<client>/<serial|parallel>/lockswap with
// its .../floor sibling.

// benchClient is one client's floor cycle and a Locker on the same
// client library.
type benchClient struct {
	name   string
	addr   string // the server's
	floor  func() benchloop.Cycle
	locker lockswap.Locker
}

// ours returns a new lockswap cycle on c's Locker.
func (c benchClient) ours() benchloop.Cycle { return benchloop.TryCycle(c.locker, benchTTL) }

// benchTTL is the TTL of the benchmarks' locks.
const benchTTL = 10 * time.Second

func BenchmarkCycle(b *testing.B) {
	for _, client := range benchClients(b) {
		for _, shape := range benchloop.Uncontended {
			b.Run(client.name+"/"+shape.Name+"/floor", func(b *testing.B) {
				benchloop.Loop{Shape: shape, NewCycle: client.floor}.Bench(b, b.N)
			})
			b.Run(client.name+"/"+shape.Name+"/lockswap", func(b *testing.B) {
				benchloop.Loop{Shape: shape, NewCycle: client.ours}.Bench(b, b.N)
			})
		}
	}
}

// BenchmarkCyclePaired runs the serial cycle of the floor and of lockswap
// in alternating blocks of 16 cycles within one benchmark, and reports each
// one's ns per cycle and their ratio. On a shared virtual machine the
// serial round trip switches between latency modes for seconds at a time,
// so that two sub-benchmarks run one after the other can land in different
// modes; alternating puts both in the same ones. Run:
//
//	go test -run '^$' -bench CyclePaired -benchtime=6000x -count 5 ./singleredis/
func BenchmarkCyclePaired(b *testing.B) {
	for _, client := range benchClients(b) {
		b.Run(client.name, func(b *testing.B) {
			benchloop.Paired(b, b.N, benchloop.Pair{Base: client.floor(), Ours: client.ours(), BaseName: "floor"})
		})
	}
}

// BenchmarkParallelPaired is issue 31's 32-goroutine target measured in
// turns: 32 goroutines cycle locks on distinct keys through the floor for
// a window, then through lockswap on the same client library for as long
// (the other way round in every other turn), turn after turn
// (benchloop.Alternate), and "ratio" is the median over the turns of
// lockswap's time per cycle ÷ the floor's in the same turn, "ratio-min"
// and "ratio-max" its range. The goroutines' context can be cancelled (a
// server's request context, say; benchloop.Loop cancels it at the first
// error), which the floor's client ignores but lockswap watches, to
// return within lockswap.DeadlineGrace of a cancellation;
// "<client>-background" runs both sides under context.Background instead.
// The "<client>-again" runs pair the floor
// with itself (A/A): the bias of the method, to read beside the others;
// "<client>-burn" pairs the floor with the floor that first does a fixed
// piece of CPU work (burn, its time measured serially as "burn-ns"):
// what that much CPU per cycle costs the throughput of 32 goroutines sharing the machine's cores
// with the server. Run:
//
//	go test -run '^$' -bench ParallelPaired -benchtime=20x -count 3 ./singleredis/
func BenchmarkParallelPaired(b *testing.B) {
	again := map[string]bool{"redigo": true, "rueidis-pipelined": true}
	for _, client := range benchClients(b) {
		b.Run(client.name, func(b *testing.B) {
			benchloop.Alternate(b, b.N, benchloop.Alternation{Shape: benchloop.Parallel(32), Base: client.floor, Ours: client.ours, BaseName: "floor"})
		})
		b.Run(client.name+"-background", func(b *testing.B) {
			floor := func() benchloop.Cycle { return benchloop.UnderBackground(client.floor()) }
			ours := func() benchloop.Cycle { return benchloop.UnderBackground(client.ours()) }
			benchloop.Alternate(b, b.N, benchloop.Alternation{Shape: benchloop.Parallel(32), Base: floor, Ours: ours, BaseName: "floor"})
		})
		if again[client.name] {
			b.Run(client.name+"-again", func(b *testing.B) {
				benchloop.Alternate(b, b.N, benchloop.Alternation{Shape: benchloop.Parallel(32), Base: client.floor, Ours: client.floor, BaseName: "floor", OursName: "floor-again"})
			})
			b.Run(client.name+"-burn", func(b *testing.B) {
				burned := func() benchloop.Cycle {
					floor := client.floor()
					return func(ctx context.Context, key string) error {
						burn()
						return floor(ctx, key)
					}
				}
				benchloop.Alternate(b, b.N, benchloop.Alternation{Shape: benchloop.Parallel(32), Base: client.floor, Ours: burned, BaseName: "floor", OursName: "floor-burn"})
				start := time.Now()
				for range 10000 {
					burn()
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/10000, "burn-ns")
			})
		}
	}
}

// burn does a fixed piece of CPU work (about 1.8 µs on the 2-core test
// machine): 16 SHA-256 blocks.
func burn() {
	var buf [64]byte
	for range 16 {
		sum := sha256.Sum256(buf[:])
		copy(buf[:], sum[:])
	}
	burnSink.Store(uint32(buf[0]))
}

// burnSink keeps burn's work from being optimized away.
var burnSink atomic.Uint32

// benchLocker returns a singleredis Locker on c, closed at cleanup.
func benchLocker(b *testing.B, c redisclient.Client) *singleredis.Locker {
	lk, err := singleredis.New(c, singleredis.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	return lk
}

// benchClients starts a redis-server and returns the floor and lockswap
// cycles of each client on it.
func benchClients(b *testing.B) []benchClient {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	addr := srv.Addr()
	token := "0123456789abcdef0123456789abcdef"

	// go-redis, with ContextTimeoutEnabled (as the docs recommend) and as
	// it comes (without it): each floor on its own client, lockswap on
	// another built the same way.
	sha := redistest.GoRedisClient(b, addr).ScriptLoad(context.Background(), redisscript.CompareAndDelete.Source()).Val()
	goredisFloor := func(gr *goredislib.Client) func() benchloop.Cycle {
		return func() benchloop.Cycle {
			return func(ctx context.Context, key string) error {
				ok, err := gr.SetNX(ctx, key, token, benchTTL).Result()
				if err != nil || !ok {
					return fmt.Errorf("floor SET: %v %v", ok, err)
				}
				return gr.EvalSha(ctx, sha, []string{key}, token).Err()
			}
		}
	}
	grLocker := benchLocker(b, redistest.GoRedis(b, addr))
	grDefLocker := benchLocker(b, redistest.GoRedisDefaults(b, addr))
	grDefault := goredislib.NewClient(&goredislib.Options{Addr: addr})
	b.Cleanup(func() { grDefault.Close() })

	// redigo
	pool := redistest.RedigoPool(b, addr)
	rgLocker := benchLocker(b, redistest.Redigo(b, addr))
	redigoFloor := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			c, err := pool.GetContext(ctx)
			if err != nil {
				return err
			}
			v, err := redigo.DoContext(c, ctx, "SET", key, token, "NX", "PX", benchTTL.Milliseconds())
			c.Close()
			if err != nil || v == nil {
				return fmt.Errorf("floor SET: %v %v", v, err)
			}
			c, err = pool.GetContext(ctx)
			if err != nil {
				return err
			}
			_, err = redigo.DoContext(c, ctx, "EVALSHA", sha, 1, key, token)
			c.Close()
			return err
		}
	}

	// rueidis (auto-pipelining: concurrent callers share writes): the
	// floor on a client as rueidis builds it by default and on one with
	// AlwaysPipelining (which lsrueidis.NewClient sets, as the docs
	// recommend); lockswap on the adapter NewClient returns.
	rueidisFloor := func(rc rueidislib.Client) func() benchloop.Cycle {
		return func() benchloop.Cycle {
			return func(ctx context.Context, key string) error {
				err := rc.Do(ctx, rc.B().Set().Key(key).Value(token).Nx().PxMilliseconds(benchTTL.Milliseconds()).Build()).Error()
				if err != nil {
					return fmt.Errorf("floor SET: %v", err)
				}
				return rc.Do(ctx, rc.B().Evalsha().Sha1(sha).Numkeys(1).Key(key).Arg(token).Build()).Error()
			}
		}
	}
	rcPipelined, rcAdapter, err := lsrueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{addr},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rcPipelined.Close)
	rcLocker := benchLocker(b, rcAdapter)

	return []benchClient{
		{"goredis", addr, goredisFloor(redistest.GoRedisClient(b, addr)), grLocker},
		{"goredis-default", addr, goredisFloor(grDefault), grDefLocker},
		{"redigo", addr, redigoFloor, rgLocker},
		{"rueidis", addr, rueidisFloor(redistest.RueidisClient(b, addr)), rcLocker},
		{"rueidis-pipelined", addr, rueidisFloor(rcPipelined), rcLocker},
	}
}

// BenchmarkClientsPaired compares the client libraries under lockswap:
// the serial cycle of singleredis on redigo and on rueidis (through
// lsrueidis.NewClient, as the docs recommend), each paired with
// singleredis on go-redis with ContextTimeoutEnabled (the default
// client=) in alternating blocks as BenchmarkCyclePaired does. "ratio" is
// the other client's time per cycle ÷ go-redis's. "rueidis-named" pairs
// singleredis on lsrueidis.NewNamed of a client rueidis builds as it
// comes (without AlwaysPipelining: a request alone on its connection is
// written and read on the caller's goroutine, and the adapter, which
// cannot tell how the client was made, hands each command to a worker
// goroutine to watch its cancellation) with singleredis on NewClient's
// adapter: what building the client and adapter the other way costs
// serially. Run:
//
//	go test -run '^$' -bench ClientsPaired -benchtime=6000x -count 6 ./singleredis/
func BenchmarkClientsPaired(b *testing.B) {
	lockers := map[string]lockswap.Locker{}
	var addr string
	for _, c := range benchClients(b) {
		lockers[c.name], addr = c.locker, c.addr
	}
	lockers["rueidis-named"] = benchLocker(b, lsrueidis.NewNamed(redistest.RueidisClient(b, addr), addr))
	for _, p := range []struct{ base, name string }{{"goredis", "redigo"}, {"goredis", "rueidis"}, {"rueidis", "rueidis-named"}} {
		b.Run(p.name, func(b *testing.B) {
			benchloop.Paired(b, b.N, benchloop.Pair{
				Base: benchloop.TryCycle(lockers[p.base], benchTTL), Ours: benchloop.TryCycle(lockers[p.name], benchTTL),
				BaseName: p.base, OursName: p.name})
		})
	}
}

// BenchmarkSeparateLockers is issue 15's scenario (iii) across processes:
// 8 goroutines on one key, each with a Locker and a client of its own (what
// 8 processes see), cycling Acquire + Release. It compares, in one run:
//
//   - floor: raw SET NX PX retried every 1 ms + EVALSHA compare-and-delete,
//     one go-redis client per goroutine (the polling floor);
//   - poll: singleredis as it waits by default (polling per DefaultRetry);
//   - fair: singleredis with Options.FairWait.
//
// and reports acq/s, fairness (min ÷ max acquisitions per goroutine) and
// requests per Acquire + Release cycle (the lockswap variants). Run:
//
//	go test -run '^$' -bench SeparateLockers -benchtime 3s -count 3 ./singleredis/
func BenchmarkSeparateLockers(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	addr := srv.Addr()
	const goroutines, ttl = 8, 10 * time.Second
	shape := benchloop.Contended(goroutines)
	b.Run("floor", func(b *testing.B) {
		n := 0
		loop := benchloop.Loop{Shape: shape, Warm: 2, NewCycle: func() benchloop.Cycle {
			gr := redistest.GoRedisClient(b, addr)
			sha := gr.ScriptLoad(context.Background(), redisscript.CompareAndDelete.Source()).Val()
			n++
			token := fmt.Sprintf("floor-%d", n)
			return func(ctx context.Context, key string) error {
				for {
					ok, err := gr.SetNX(ctx, key, token, ttl).Result()
					if err != nil {
						return err
					}
					if ok {
						break
					}
					time.Sleep(time.Millisecond)
				}
				return gr.EvalSha(ctx, sha, []string{key}, token).Err()
			}
		}}
		loop.Bench(b, b.N)
	})
	for _, c := range fairClients {
		for _, fair := range []bool{false, true} {
			name := "poll"
			if fair {
				name = "fair"
			}
			b.Run(c.Name+"/"+name, func(b *testing.B) {
				var counters []*countingSub
				loop := benchloop.Loop{Shape: shape, Warm: 2, NewCycle: func() benchloop.Cycle {
					cc := newCounting(c.New(b, addr))
					counters = append(counters, cc)
					lk, err := singleredis.New(cc, singleredis.Options{FairWait: fair})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { lk.Close() })
					return benchloop.AcquireCycle(lk, ttl)
				}}
				r := loop.Bench(b, b.N)
				var sent int64
				for _, cc := range counters {
					sent += cc.Requests()
				}
				// Acquire + Release, the warm-up cycles included.
				b.ReportMetric(float64(sent)/float64(r.Ops+goroutines*loop.Warm), "req/cycle")
			})
		}
	}
}
