package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

func Example() {
	mr, _ := miniredis.Run() // stands in for your Redis
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)) // the server clock, which the first fence reads
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	locker, err := singleredis.New(goredis.New(rdb), singleredis.Options{Prefix: "locks:", Fence: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	l, err := locker.TryAcquire(ctx, "invoice-42", lockswap.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	fence, _ := l.Fence()
	fmt.Println("held, fence", fence)

	_, err = locker.TryAcquire(ctx, "invoice-42")
	fmt.Println("second attempt held by another owner:", errors.Is(err, lockswap.ErrHeld))

	fmt.Println("release:", l.Release(ctx))
	// Output:
	// held, fence 1795435200000000
	// second attempt held by another owner: true
	// release: <nil>
}
