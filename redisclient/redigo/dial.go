package redigo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=redigo available to Redis URLs opened
// through package registry or backend.
func init() { registry.RegisterRedisClient("redigo", dial) }

func dial(s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	opts := []redis.DialOption{
		redis.DialConnectTimeout(s.DialTimeout), redis.DialDatabase(s.DB),
		redis.DialUsername(s.Username), redis.DialPassword(s.Password),
	}
	if s.TLS != nil {
		opts = append(opts, redis.DialUseTLS(true), redis.DialTLSConfig(s.TLS))
	}
	addr := s.Addr
	pool := &redis.Pool{MaxIdle: 64, IdleTimeout: 5 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, opts...)
		}}
	return NewNamed(pool, fmt.Sprintf("%s/%d", addr, s.DB)), pool, nil
}
