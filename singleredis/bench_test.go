package singleredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
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

// benchClient is one client's floor and lockswap cycle.
type benchClient struct {
	name  string
	floor func() benchloop.Cycle
	ours  func() benchloop.Cycle
}

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

// benchClients starts a redis-server and returns the floor and lockswap
// cycles of each client on it.
func benchClients(b *testing.B) []benchClient {
	srv := testserver.RedisT(b, testserver.RedisOptions{})
	addr := srv.Addr()
	token := "0123456789abcdef0123456789abcdef"
	ttl := 10 * time.Second

	// go-redis
	gr := redistest.GoRedisClient(b, addr)
	grLocker, _ := singleredis.New(redistest.GoRedis(b, addr), singleredis.Options{})
	sha := gr.ScriptLoad(context.Background(), redisscript.CompareAndDelete.Source()).Val()
	goredisFloor := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			ok, err := gr.SetNX(ctx, key, token, ttl).Result()
			if err != nil || !ok {
				return fmt.Errorf("floor SET: %v %v", ok, err)
			}
			return gr.EvalSha(ctx, sha, []string{key}, token).Err()
		}
	}

	// redigo
	pool := redistest.RedigoPool(b, addr)
	rgLocker, _ := singleredis.New(redistest.Redigo(b, addr), singleredis.Options{})
	redigoFloor := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			c, err := pool.GetContext(ctx)
			if err != nil {
				return err
			}
			v, err := redigo.DoContext(c, ctx, "SET", key, token, "NX", "PX", ttl.Milliseconds())
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

	// rueidis (auto-pipelining: concurrent callers share writes)
	rc := redistest.RueidisClient(b, addr)
	rcLocker, _ := singleredis.New(redistest.Rueidis(b, addr), singleredis.Options{})
	rueidisFloor := func() benchloop.Cycle {
		return func(ctx context.Context, key string) error {
			err := rc.Do(ctx, rc.B().Set().Key(key).Value(token).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
			if err != nil {
				return fmt.Errorf("floor SET: %v", err)
			}
			return rc.Do(ctx, rc.B().Evalsha().Sha1(sha).Numkeys(1).Key(key).Arg(token).Build()).Error()
		}
	}

	lockswapCycle := func(lk lockswap.Locker) func() benchloop.Cycle {
		return func() benchloop.Cycle { return benchloop.TryCycle(lk, ttl) }
	}

	return []benchClient{
		{"goredis", goredisFloor, lockswapCycle(grLocker)},
		{"redigo", redigoFloor, lockswapCycle(rgLocker)},
		{"rueidis", rueidisFloor, lockswapCycle(rcLocker)},
	}
}
