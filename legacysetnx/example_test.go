package legacysetnx_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// Take part in the locks old clients write under "lock.<name>": a live
// timestamp written by an old client is honoured, an expired one is taken
// over, and lockswap's own lock is a plain timestamp the old clients read.
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx := context.Background()

	locker, err := legacysetnx.New(goredis.New(rdb), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	// An old client holds lock.report for another minute.
	mr.Set("lock.report", strconv.FormatInt(time.Now().Unix()+60, 10))
	_, err = locker.TryAcquire(ctx, "report", lockswap.WithTTL(10*time.Second))
	fmt.Println("held by the old client:", errors.Is(err, lockswap.ErrHeld))

	// Its timestamp has passed (the old client crashed): take it over.
	mr.Set("lock.report", strconv.FormatInt(time.Now().Unix()-5, 10))
	l, err := locker.TryAcquire(ctx, "report", lockswap.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	stored, _ := mr.Get("lock.report")
	ours, _, _ := legacysetnx.Timestamp(l)
	fmt.Println("stored value is our timestamp:", stored == ours)
	_, live, _ := locker.Peek(ctx, "report")
	fmt.Println("live:", live)
	fmt.Println("release:", l.Release(ctx))
	fmt.Println("key left:", mr.Exists("lock.report"))
	// Output:
	// held by the old client: true
	// stored value is our timestamp: true
	// live: true
	// release: <nil>
	// key left: false
}

// Values that are not timestamps are refused and left alone.
func ExampleLocker_TryAcquire_notATimestamp() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	locker, _ := legacysetnx.New(goredis.New(rdb), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
	defer locker.Close()

	mr.Set("lock.cache", "some application data")
	_, err := locker.TryAcquire(context.Background(), "cache")
	fmt.Println(errors.Is(err, lockswap.ErrInvalid))
	v, _ := mr.Get("lock.cache")
	fmt.Println(v)
	// Output:
	// true
	// some application data
}

// The unit has no default: it must be the one the old clients write.
func ExampleNew_unitRequired() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	_, err := legacysetnx.New(goredis.New(rdb), legacysetnx.Options{Prefix: "lock."})
	fmt.Println(errors.Is(err, lockswap.ErrInvalid))

	// npm redis-lock writes milliseconds under lock.<name>.
	locker, err := legacysetnx.New(goredis.New(rdb), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds})
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	fmt.Println(locker.TTLRange())
	// Output:
	// true
	// 10ms 8760h0m0s
}

// Guarantees are data: the clock assumption is why require=clock-independent
// refuses this backend.
func ExampleGuarantees() {
	g := legacysetnx.Guarantees()
	fmt.Println(g.Clock, g.Fencing, g.StaleReleaseSafe)
	fmt.Println(g.Require(lockswap.PropClockIndependent) != nil)
	// Output:
	// synchronized wall clocks false true
	// true
}
