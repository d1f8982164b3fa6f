package singleredis_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// BenchmarkPermitCyclePaired compares, serially and in alternating blocks
// (benchloop.Paired), one TryAcquire + Release of a permit of limit 4
// with the same cycle of the key's mutex, on each client, fenced: ratio
// is permit ÷ mutex (issue 33's target: ≤ 1.3). Run:
//
//	go test -run '^$' -bench PermitCyclePaired -benchtime=4000x -count 5 ./singleredis/
func BenchmarkPermitCyclePaired(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	const ttl = 10 * time.Second
	for _, c := range redistest.Clients {
		b.Run(c.Name, func(b *testing.B) {
			lk, err := singleredis.New(c.New(b, srv.Addr()), singleredis.Options{Fence: true})
			if err != nil {
				b.Fatal(err)
			}
			defer lk.Close()
			benchloop.Paired(b, b.N, benchloop.Pair{
				Base:     benchloop.HoldCycle(lk.TryAcquire, ttl, 0),
				Ours:     benchloop.HoldCycle(lk.TryAcquire, ttl, 0, lockswap.WithPermits(4)),
				BaseName: "mutex",
			})
		})
	}
}

// BenchmarkPermitsContended is issue 33's throughput scenario: 8
// goroutines on one key, holding what they take for 5 ms; the key's
// mutex, then permits of limit 4. It reports acquisitions per second and
// fairness (min ÷ max acquisitions per goroutine); the target is permits
// ≥ 3× the mutex's acq/s with fairness ≥ 0.9. Three shapes: one-locker,
// the goroutines of one Locker (the contended shape of docs/benchmarks.md,
// where they wait in the Locker's local queue); separate, each goroutine
// with a Locker and a client of its own (what 8 processes see: they
// poll); and separate-fair, the same with FairWait (the queue in Redis).
// Run:
//
//	go test -run '^$' -bench PermitsContended -benchtime 3s -count 3 ./singleredis/
func BenchmarkPermitsContended(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	const goroutines, ttl, hold = 8, 10 * time.Second, 5 * time.Millisecond
	for _, c := range redistest.Clients {
		for _, shape := range []string{"one-locker", "separate", "separate-fair"} {
			separate := shape != "one-locker"
			for _, limit := range []int{0, 4} {
				name := "mutex"
				var opts []lockswap.Option
				if limit > 0 {
					name, opts = "permits4", []lockswap.Option{lockswap.WithPermits(limit)}
				}
				b.Run(c.Name+"/"+shape+"/"+name, func(b *testing.B) {
					newLocker := func() *singleredis.Locker {
						lk, err := singleredis.New(c.New(b, srv.Addr()), singleredis.Options{Fence: true, FairWait: shape == "separate-fair"})
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { lk.Close() })
						return lk
					}
					var shared *singleredis.Locker
					if !separate {
						shared = newLocker()
					}
					loop := benchloop.Loop{Shape: benchloop.Contended(goroutines), Warm: 2, NewCycle: func() benchloop.Cycle {
						lk := shared
						if separate {
							lk = newLocker()
						}
						return benchloop.HoldCycle(lk.Acquire, ttl, hold, opts...)
					}}
					loop.Bench(b, b.N)
				})
			}
		}
	}
}

// BenchmarkReadCyclePaired compares, serially and in alternating blocks,
// one TryAcquire + Release of a read hold (then of the write hold) with
// the same cycle of the key's mutex, on each client, fenced: ratio is
// hold ÷ mutex (issue 33's target for a read hold: ≤ 1.2). Run:
//
//	go test -run '^$' -bench ReadCyclePaired -benchtime=4000x -count 5 ./singleredis/
func BenchmarkReadCyclePaired(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	const ttl = 10 * time.Second
	for _, c := range redistest.Clients {
		for _, mode := range []struct {
			name string
			opt  lockswap.Option
		}{{"read", lockswap.WithRead()}, {"write", lockswap.WithWrite()}} {
			b.Run(c.Name+"/"+mode.name, func(b *testing.B) {
				lk, err := singleredis.New(c.New(b, srv.Addr()), singleredis.Options{Fence: true})
				if err != nil {
					b.Fatal(err)
				}
				defer lk.Close()
				benchloop.Paired(b, b.N, benchloop.Pair{
					Base:     benchloop.HoldCycle(lk.TryAcquire, ttl, 0),
					Ours:     benchloop.HoldCycle(lk.TryAcquire, ttl, 0, mode.opt),
					BaseName: "mutex",
				})
			})
		}
	}
}

// zsetSemaphore is the counting semaphore as commonly hand-written on
// go-redis (Redis in Action's acquire_semaphore): in one MULTI, drop the
// members older than the timeout, add ours scored by the time, and read
// our rank; a rank within the limit holds, another removes itself.
// Release is ZREM. It has no fence, no slot, and trusts the clients'
// clocks.
func zsetSemaphore(rdb *redis.Client, limit int64, timeout time.Duration) benchloop.Cycle {
	return func(ctx context.Context, key string) error {
		id := lockstate.NewToken()
		now := time.Now()
		var rank *redis.IntCmd
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.Add(-timeout).UnixMilli(), 10))
			p.ZAdd(ctx, key, redis.Z{Score: float64(now.UnixMilli()), Member: id})
			rank = p.ZRank(ctx, key, id)
			return nil
		}); err != nil {
			return err
		}
		if rank.Val() >= limit {
			rdb.ZRem(ctx, key, id)
			return fmt.Errorf("all %d permits held", limit)
		}
		return rdb.ZRem(ctx, key, id).Err()
	}
}

// BenchmarkPermitVsZSet compares, serially and in alternating blocks, a
// permit's TryAcquire + Release (limit 4, go-redis; plain, then fenced)
// with the nearest peer that runs here: the hand-written ZSET semaphore
// above, on a go-redis client of its own. Ratio is lockswap ÷ zset. Run:
//
//	go test -run '^$' -bench PermitVsZSet -benchtime=4000x -count 5 ./singleredis/
func BenchmarkPermitVsZSet(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	for _, fence := range []bool{false, true} {
		b.Run(fmt.Sprintf("fence=%v", fence), func(b *testing.B) {
			lk, err := singleredis.New(redistest.GoRedis(b, srv.Addr()), singleredis.Options{Fence: fence})
			if err != nil {
				b.Fatal(err)
			}
			defer lk.Close()
			benchloop.Paired(b, b.N, benchloop.Pair{
				Base:     zsetSemaphore(redistest.GoRedisClient(b, srv.Addr()), 4, 10*time.Second),
				Ours:     benchloop.HoldCycle(lk.TryAcquire, 10*time.Second, 0, lockswap.WithPermits(4)),
				BaseName: "zset",
			})
		})
	}
}
