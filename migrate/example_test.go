package migrate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/migrate"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

func Example() {
	mr, _ := miniredis.Run() // stands in for the Redis the old services use
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	rc := goredis.New(rdb)

	legacy, _ := legacysetnx.New(rc, legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
	target, _ := singleredis.New(rc, singleredis.Options{Prefix: "locks:"})
	locker, err := migrate.New(migrate.Options{Phase: migrate.PhaseDual, Legacy: legacy, Target: target})
	if err != nil {
		panic(err)
	}
	l, err := locker.TryAcquire(context.Background(), "billing", lockswap.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	// Both keys are held: old clients see lock.billing, new ones locks:billing.
	fmt.Println(mr.Exists("lock.billing"), mr.Exists("locks:billing"))
	l.Release(context.Background())
	fmt.Println(mr.Exists("lock.billing"), mr.Exists("locks:billing"))
	// Output:
	// true true
	// false false
}
