package soak

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redisscript"
)

// FloorBackend is the Backend label of the floor configurations: no
// lockswap at all, the Redis client itself running the same cycle (see
// openFloor). Its ratio is what the machine gives any client beside the
// hogs, and a backend's ratio is read against its client's floor's.
const FloorBackend = "floor"

// releaseScript deletes KEYS[1] when it still holds ARGV[1]: the release
// every Redis lock library runs, lockswap's own compare-and-delete, run
// here by each client's own script runner.
var releaseScript = redisscript.CompareAndDelete.Source()

// taker takes key for ttl and returns how to give it back.
type taker func(ctx context.Context, key string, ttl time.Duration) (release func(context.Context) error, err error)

// lockerTaker takes keys with lk.Acquire.
func lockerTaker(lk lockswap.Locker) taker {
	return func(ctx context.Context, key string, ttl time.Duration) (func(context.Context) error, error) {
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(ttl))
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
}

// openFloor builds client (goredis, redigo or rueidis) the way the client
// builds it by default (redigo, which has no default pool: with the pool
// settings of lockswap's redigo adapter), on addr, and returns a
// taker that runs the cycle of a single-instance Redis lock with it and
// nothing else: SET key token NX with the TTL as expiry (go-redis sends a
// whole second as EX, the others PX), then the release script, each call
// under the caller's context. The token is random (crypto/rand's Text),
// like lockswap's. A release that finds the key no longer
// holds the token is an error, errFloorLost, as lockswap's ErrLost.
func openFloor(client, addr string) (taker, func(), error) {
	switch client {
	case "goredis":
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		script := goredis.NewScript(releaseScript)
		return func(ctx context.Context, key string, ttl time.Duration) (func(context.Context) error, error) {
			token := rand.Text()
			ok, err := c.SetNX(ctx, key, token, ttl).Result()
			if err = floorTook(ok, err); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				n, err := script.Run(ctx, c, []string{key}, token).Int64()
				return floorReleased(n, err)
			}, nil
		}, func() { c.Close() }, nil
	case "redigo":
		p := &redigo.Pool{MaxIdle: 64, IdleTimeout: 5 * time.Minute, DialContext: func(ctx context.Context) (redigo.Conn, error) {
			return redigo.DialContext(ctx, "tcp", addr)
		}}
		script := redigo.NewScript(1, releaseScript)
		do := func(ctx context.Context, f func(redigo.Conn) (any, error)) (any, error) {
			conn, err := p.GetContext(ctx)
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return f(conn)
		}
		return func(ctx context.Context, key string, ttl time.Duration) (func(context.Context) error, error) {
			token := rand.Text()
			v, err := do(ctx, func(c redigo.Conn) (any, error) {
				return redigo.DoContext(c, ctx, "SET", key, token, "NX", "PX", ttl.Milliseconds())
			})
			if err = floorTook(v != nil, err); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				n, err := redigo.Int64(do(ctx, func(c redigo.Conn) (any, error) { return script.DoContext(ctx, c, key, token) }))
				return floorReleased(n, err)
			}, nil
		}, func() { p.Close() }, nil
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			return nil, nil, fmt.Errorf("floor: rueidis: %w", err)
		}
		script := rueidis.NewLuaScript(releaseScript)
		return func(ctx context.Context, key string, ttl time.Duration) (func(context.Context) error, error) {
			token := rand.Text()
			err := c.Do(ctx, c.B().Set().Key(key).Value(token).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
			if rueidis.IsRedisNil(err) {
				err = errFloorHeld
			}
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				n, err := script.Exec(ctx, c, []string{key}, []string{token}).AsInt64()
				return floorReleased(n, err)
			}, nil
		}, c.Close, nil
	}
	return nil, nil, fmt.Errorf("floor: no client %q (want one of %v)", client, Clients)
}

// errFloorHeld is a floor acquire that found its key held: nobody else
// holds the soak's keys, so it counts as an error.
var errFloorHeld = errors.New("floor: SET NX found the key held")

// errFloorLost is a floor release that found the key no longer holding
// its token (expired, or taken by another): lockswap's Release would say
// ErrLost.
var errFloorLost = errors.New("floor: the release found the lock gone")

func floorReleased(deleted int64, err error) error {
	if err != nil {
		return err
	}
	if deleted != 1 {
		return errFloorLost
	}
	return nil
}

func floorTook(ok bool, err error) error {
	if err != nil {
		return err
	}
	if !ok {
		return errFloorHeld
	}
	return nil
}
