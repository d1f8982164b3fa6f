package redigo

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=redigo available to Redis URLs opened
// through package registry or backend.
func init() { registry.RegisterRedisClient("redigo", dial) }

// dial makes the pool without connecting (redigo connects on first use),
// so it has no use for the open's context.
func dial(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	conns := new(adapt.Conns)
	nd := &net.Dialer{Timeout: s.DialTimeout, KeepAlive: 5 * time.Minute}
	opts := []redis.DialOption{
		redis.DialDatabase(s.DB), redis.DialUsername(s.Username), redis.DialPassword(s.Password),
		// Every connection recorded, for Close (see closer).
		redis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			if conns.Closed() {
				return nil, adapt.ErrClosed
			}
			nc, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return conns.Track(nc)
		}),
	}
	if s.TLS != nil {
		opts = append(opts, redis.DialUseTLS(true), redis.DialTLSConfig(s.TLS))
	}
	addr := s.Addr
	pool := &redis.Pool{MaxIdle: 64, IdleTimeout: 5 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, opts...)
		}}
	return NewNamed(pool, fmt.Sprintf("%s/%d", addr, s.DB)), closer{pool, conns}, nil
}

// closer closes a pool that a URL opened. The pool's own Close closes
// only its idle connections: a command in flight on a hung server would
// go on waiting for its deadline, with redigo's goroutine reading its
// connection. Every connection is closed as well, so that those fail at
// once.
type closer struct {
	pool  *redis.Pool
	conns *adapt.Conns
}

func (c closer) Close() error {
	err := c.pool.Close()
	c.conns.Close()
	if err != nil {
		return fmt.Errorf("redigo: close pool: %w", err)
	}
	return nil
}
