package redigo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
			if nc, err = conns.Track(nc); err != nil {
				return nil, err
			}
			if w, ok := ctx.Value(watchKey{}).(*dialWatch); ok && !w.set(nc) {
				return nil, ctx.Err()
			}
			return nc, nil
		}),
	}
	if s.TLS != nil {
		opts = append(opts, redis.DialUseTLS(true), redis.DialTLSConfig(s.TLS))
	}
	addr := s.Addr
	pool := &redis.Pool{MaxIdle: 64, IdleTimeout: 5 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			// redigo's TLS handshake watches neither ctx nor its
			// deadline (10 s of its own): ctx's end closes the
			// connection under it. A context of its own ends at
			// ctx's deadline even when ctx has no Done channel (the
			// kit's request under a caller that cannot be cancelled).
			if d, ok := ctx.Deadline(); ok {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, d)
				defer cancel()
			}
			w := new(dialWatch)
			stop := context.AfterFunc(ctx, w.end)
			c, err := redis.DialContext(context.WithValue(ctx, watchKey{}, w), "tcp", addr, opts...)
			if !stop() {
				// ctx ended meanwhile, and closed the connection.
				if err == nil {
					c.Close()
					return nil, ctx.Err()
				}
				return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
			}
			if err != nil {
				return nil, err
			}
			if err := checkServer(ctx, c); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}}
	return NewNamed(pool, fmt.Sprintf("%s/%d", addr, s.DB)), closer{pool, conns}, nil
}

// watchKey is the context key of a pool dial's [dialWatch].
type watchKey struct{}

// dialWatch closes the connection of one pool dial when the dial's
// context ends before the dial is done.
type dialWatch struct {
	mu    sync.Mutex
	nc    net.Conn
	ended bool
}

// set records nc, the dial's connection; it closes nc and reports false
// when the context has ended already.
func (w *dialWatch) set(nc net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		nc.Close()
		return false
	}
	w.nc = nc
	return true
}

// end is called when the dial's context ends: it closes the connection.
func (w *dialWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.nc != nil {
		w.nc.Close()
	}
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

// checkServer makes sure a new connection talks to Redis: HELLO 2 (which
// changes nothing on a RESP2 connection, and which ACLs never refuse) must
// be answered with the server's description, or with an error reply (a
// Redis without HELLO). go-redis and rueidis open each connection with
// HELLO 3 and fail on a reply that is not its map; redigo checks no reply,
// so without this a server that answers +OK to everything (not Redis, a
// misrouted port) would pass SET NX as a lock taken, and a script's reply
// as contention. The error is not a Redis error reply: it matches
// lockswap.ErrUnavailable through redisclient.Classify, as the other
// clients' handshake errors do.
func checkServer(ctx context.Context, c redis.Conn) error {
	v, err := redis.DoContext(c, ctx, "HELLO", 2)
	var re redis.Error
	if errors.As(err, &re) {
		return nil
	}
	if err != nil {
		return err
	}
	if a, ok := v.([]any); !ok || len(a) < 2 || len(a)%2 != 0 {
		return fmt.Errorf("unexpected reply %.40q to HELLO (want the server's description): not a Redis server", fmt.Sprint(v))
	}
	return nil
}
