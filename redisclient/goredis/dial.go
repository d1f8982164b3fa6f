package goredis

import (
	"context"
	"io"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=goredis (the default) available to
// Redis URLs opened through package registry or backend.
func init() { registry.RegisterRedisClient("goredis", dial) }

// dial makes the client without connecting (go-redis connects on first
// use), so it has no use for the open's context.
func dial(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr: s.Addr, Username: s.Username, Password: s.Password, DB: s.DB,
		TLSConfig: s.TLS, DialTimeout: s.DialTimeout, ContextTimeoutEnabled: true,
	})
	return New(rdb), rdb, nil
}
