package goredis

import (
	"io"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=goredis (the default) available to
// Redis URLs opened through package registry or backend.
func init() { registry.RegisterRedisClient("goredis", dial) }

func dial(s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr: s.Addr, Username: s.Username, Password: s.Password, DB: s.DB,
		TLSConfig: s.TLS, DialTimeout: s.DialTimeout, ContextTimeoutEnabled: true,
	})
	return New(rdb), rdb, nil
}
