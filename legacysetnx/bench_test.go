package legacysetnx_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// The benchmarks compare one acquire+release cycle of legacysetnx with the
// raw floor of the same client in the same run: what an old client does on
// a free key, SETNX key <timestamp> then DEL key (two round trips, no
// scripts). Run:
//
//	go test -run '^$' -bench . -benchmem -count 5 ./legacysetnx/ | tee /tmp/legacy.txt
//
// and compare each BenchmarkCycle/<client>/<serial|parallel>/<variant> with
// its .../floor sibling.

var benchSeq atomic.Int64

func benchKeys(n int) []string {
	g := benchSeq.Add(1)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("bench:%d:%d", g, i)
	}
	return ks
}

type cycleFunc func(ctx context.Context, key string) error

func runCycle(b *testing.B, parallel bool, newCycle func() cycleFunc) {
	ctx := context.Background()
	b.ReportAllocs()
	if !parallel {
		cycle, ks := newCycle(), benchKeys(1024)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := cycle(ctx, ks[i&1023]); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(16) // 32 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cycle, ks := newCycle(), benchKeys(1024)
		for i := 0; pb.Next(); i++ {
			if err := cycle(ctx, ks[i&1023]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkCycle(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	addr := srv.Addr()
	ttl := 10 * time.Second
	stampNow := func() string { return strconv.FormatInt(time.Now().Unix()+11, 10) }

	gr := redistest.GoRedisClient(b, addr)
	goredisFloor := func() cycleFunc {
		return func(ctx context.Context, key string) error {
			ok, err := gr.SetNX(ctx, key, stampNow(), 0).Result()
			if err != nil || !ok {
				return fmt.Errorf("floor SETNX: %v %v", ok, err)
			}
			return gr.Del(ctx, key).Err()
		}
	}
	pool := redistest.RedigoPool(b, addr)
	redigoFloor := func() cycleFunc {
		return func(ctx context.Context, key string) error {
			c, err := pool.GetContext(ctx)
			if err != nil {
				return err
			}
			v, err := redigo.Int(redigo.DoContext(c, ctx, "SETNX", key, stampNow()))
			c.Close()
			if err != nil || v != 1 {
				return fmt.Errorf("floor SETNX: %v %v", v, err)
			}
			c, err = pool.GetContext(ctx)
			if err != nil {
				return err
			}
			_, err = redigo.DoContext(c, ctx, "DEL", key)
			c.Close()
			return err
		}
	}
	ours := func(newClient redistest.NewClient, o legacysetnx.Options) func() cycleFunc {
		lk, err := legacysetnx.New(newClient(b, addr), o)
		if err != nil {
			b.Fatal(err)
		}
		return func() cycleFunc {
			return func(ctx context.Context, key string) error {
				l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}
		}
	}
	for _, client := range []struct {
		name  string
		floor func() cycleFunc
		new   redistest.NewClient
	}{
		{"goredis", goredisFloor, redistest.GoRedis},
		{"redigo", redigoFloor, redistest.Redigo},
	} {
		variants := []struct {
			name string
			c    func() cycleFunc
		}{
			{"floor", client.floor},
			{"lockswap", ours(client.new, legacysetnx.Options{Unit: legacysetnx.Seconds})},
			{"lockswap-servertime", ours(client.new, legacysetnx.Options{ServerTime: true, Unit: legacysetnx.Milliseconds})},
		}
		for _, mode := range []struct {
			name     string
			parallel bool
		}{{"serial", false}, {"parallel", true}} {
			for _, v := range variants {
				b.Run(client.name+"/"+mode.name+"/"+v.name, func(b *testing.B) { runCycle(b, mode.parallel, v.c) })
			}
		}
	}
}
