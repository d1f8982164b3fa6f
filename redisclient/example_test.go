package redisclient_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
)

func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()

	// go-redis: *redis.Client, *redis.ClusterClient, *redis.Ring, redis.UniversalClient.
	rdb := goredis.NewClient(&goredis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	viaGoRedis := redisclient.GoRedis(rdb)

	// redigo: a *redis.Pool.
	pool := &redigo.Pool{DialContext: func(ctx context.Context) (redigo.Conn, error) {
		return redigo.DialContext(ctx, "tcp", mr.Addr())
	}}
	defer pool.Close()
	viaRedigo := redisclient.Redigo(pool)

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
