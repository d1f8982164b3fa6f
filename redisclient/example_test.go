package redisclient_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()

	// go-redis: *redis.Client, *redis.ClusterClient, *redis.Ring, redis.UniversalClient.
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	viaGoRedis := goredis.New(rdb)

	// redigo: a *redis.Pool.
	pool := &redigoredis.Pool{DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
		return redigoredis.DialContext(ctx, "tcp", mr.Addr())
	}}
	defer pool.Close()
	viaRedigo := redigo.New(pool)

	ctx := context.Background()
	ok, _ := viaGoRedis.SetNX(ctx, "k", "v")
	v, _, _ := viaRedigo.Get(ctx, "k")
	fmt.Println(ok, v)

	script := redisclient.NewScript(`return redis.call("GET", KEYS[1]) .. ARGV[1]`)
	r, _ := viaRedigo.Run(ctx, script, []string{"k"}, "!")
	fmt.Println(r)
	// Output:
	// true v
	// v!
}
