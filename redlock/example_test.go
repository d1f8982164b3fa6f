package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redlock"
)

// Example takes a lock over three independent masters (miniredis here),
// shows that a second Locker is excluded, and releases.
func Example() {
	var clients []redisclient.Client
	for range 3 {
		mr, _ := miniredis.Run()
		defer mr.Close()
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		defer rdb.Close()
		clients = append(clients, goredis.New(rdb))
	}
	lk, err := redlock.New(clients, redlock.Options{Prefix: "app:"})
	if err != nil {
		panic(err)
	}
	defer lk.Close()
	other, _ := redlock.New(clients, redlock.Options{Prefix: "app:"})
	defer other.Close()

	ctx := context.Background()
	l, err := lk.Acquire(ctx, "report", lockswap.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("quorum:", lk.Quorum(), "of", lk.Guarantees().Nodes)
	fmt.Println("valid for at most the TTL:", time.Until(l.Deadline()) <= 10*time.Second)

	_, err = other.TryAcquire(ctx, "report", lockswap.WithTTL(10*time.Second))
	fmt.Println("second Locker held off:", errors.Is(err, lockswap.ErrHeld))

	fmt.Println("released:", l.Release(ctx) == nil)
	// Output:
	// quorum: 2 of 3
	// valid for at most the TTL: true
	// second Locker held off: true
	// released: true
}
