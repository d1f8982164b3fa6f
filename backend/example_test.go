package backend_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
)

func ExampleParseURL() {
	c, err := backend.ParseURL("singleredis://app:s3cret@redis.internal:6379/2?ttl=10s&fence=true")
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Backend, c.Addrs, c.DB, c.Fence)
	fmt.Println(c) // the password is redacted

	_, err = backend.ParseURL("redlock://r1:6379,r2:6379?ttl=10s")
	fmt.Println(errors.Is(err, lockswap.ErrInvalid), err)
	// Output:
	// singleredis [redis.internal:6379] 2 true
	// singleredis://app:xxxxx@redis.internal:6379/2?fence=true&ttl=10s
	// true backend: redlock needs an odd number of at least 3 independent masters, got 2 hosts: invalid argument
}

func ExampleFromEnv() {
	// LOCKSWAP_URL=singleredis://127.0.0.1:6379?ttl=10s chooses the backend;
	// the program does not change when it does.
	locker, err := backend.FromEnv(context.Background(), "")
	if err != nil {
		fmt.Println("no backend configured:", errors.Is(err, lockswap.ErrInvalid))
		return
	}
	defer locker.Close()
}
