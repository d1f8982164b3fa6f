package singleredis_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
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
// goroutines, each with a Locker and a client of its own, on one key,
// holding what they take for 5 ms; the key's mutex, then permits of
// limit 4. It reports acquisitions per second and fairness (min ÷ max
// acquisitions per goroutine); the target is permits ≥ 3× the mutex's
// acq/s with fairness ≥ 0.9. Run:
//
//	go test -run '^$' -bench PermitsContended -benchtime 3s -count 3 ./singleredis/
func BenchmarkPermitsContended(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	const goroutines, ttl, hold = 8, 10 * time.Second, 5 * time.Millisecond
	for _, c := range redistest.Clients {
		for _, limit := range []int{0, 4} {
			name := "mutex"
			var opts []lockswap.Option
			if limit > 0 {
				name, opts = "permits4", []lockswap.Option{lockswap.WithPermits(limit)}
			}
			b.Run(c.Name+"/"+name, func(b *testing.B) {
				loop := benchloop.Loop{Shape: benchloop.Contended(goroutines), Warm: 2, NewCycle: func() benchloop.Cycle {
					lk, err := singleredis.New(c.New(b, srv.Addr()), singleredis.Options{Fence: true})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { lk.Close() })
					return benchloop.HoldCycle(lk.Acquire, ttl, hold, opts...)
				}}
				loop.Bench(b, b.N)
			})
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
