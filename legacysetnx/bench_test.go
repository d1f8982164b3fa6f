package legacysetnx_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/internal/benchloop"
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

func BenchmarkCycle(b *testing.B) {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	addr := srv.Addr()
	ttl := 10 * time.Second
	stampNow := func() string { return strconv.FormatInt(time.Now().Unix()+11, 10) }

	gr := redistest.GoRedisClient(b, addr)
	goredisFloor := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			ok, err := gr.SetNX(ctx, key, stampNow(), 0).Result()
			if err != nil || !ok {
				return fmt.Errorf("floor SETNX: %v %v", ok, err)
			}
			return gr.Del(ctx, key).Err()
		}
	}
	pool := redistest.RedigoPool(b, addr)
	redigoFloor := func() benchloop.Cycle {
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
	ours := func(newClient redistest.NewClient, o legacysetnx.Options) func() benchloop.Cycle {
		lk, err := legacysetnx.New(newClient(b, addr), o)
		if err != nil {
			b.Fatal(err)
		}
		return func() benchloop.Cycle { return benchloop.TryCycle(lk, ttl) }
	}
	for _, client := range []struct {
		name  string
		floor func() benchloop.Cycle
		new   redistest.NewClient
	}{
		{"goredis", goredisFloor, redistest.GoRedis},
		{"redigo", redigoFloor, redistest.Redigo},
	} {
		variants := []struct {
			name string
			c    func() benchloop.Cycle
		}{
			{"floor", client.floor},
			{"lockswap", ours(client.new, legacysetnx.Options{Unit: legacysetnx.Seconds})},
			{"lockswap-servertime", ours(client.new, legacysetnx.Options{ServerTime: true, Unit: legacysetnx.Milliseconds})},
		}
		for _, shape := range benchloop.Uncontended {
			for _, v := range variants {
				b.Run(client.name+"/"+shape.Name+"/"+v.name, func(b *testing.B) {
					benchloop.Loop{Shape: shape, NewCycle: v.c}.Bench(b, b.N)
				})
			}
		}
	}
}
