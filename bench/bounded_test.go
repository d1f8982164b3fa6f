package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap"
)

// The bounded floors are the raw floors of redis1 with the two things
// every correct lock adds to them and that the floors leave out: a token
// of its own per acquisition (16 bytes from crypto/rand, in hex, as
// lockswap's), and a deadline per command, the way a user of the raw
// client bounds one: context.WithTimeout of the caller's context, at
// most lockswap.RequestTimeout. They keep no other promise of lockswap's
// (no grace for the reply of a cancelled acquire, no end at Close, no
// cancellation noticed by go-redis, no lost-lock watch): what they cost
// over the floor is what a user of the raw client pays for a token and
// a deadline per command set that way (lockswap keeps its deadlines
// otherwise: under context.Background with no timer per request).
// BenchmarkTurns pairs each with its floor and with lockswap on the same
// client (issue 31's 32-goroutine targets).

// boundedImpls are the bounded floors on the first server, on the same
// clients as redis1's floors (go-redis with ContextTimeoutEnabled, which
// keeps the deadline on the socket; the redigo pool; rueidis with
// AlwaysPipelining).
func boundedImpls(s *servers) []impl {
	gr, pool, rc := s.goredis[0], s.redigo[0], s.rueidis[0]
	return []impl{
		{"bounded-goredis", func(*testing.B) cycleFunc { return goredisBoundedCycle(gr) }},
		{"bounded-redigo", func(*testing.B) cycleFunc { return redigoBoundedCycle(pool) }},
		{"bounded-rueidis", func(*testing.B) cycleFunc { return rueidisBoundedCycle(rc) }},
	}
}

// boundedToken returns a token of its own for one acquisition.
func boundedToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bounded returns the context of one command for ctx.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, lockswap.RequestTimeout)
}

// The bounded cycles take a free key at the first try (BenchmarkTurns
// runs on distinct keys): a held key is an error, not a wait.

// goredisBoundedCycle is goredisFloorCycle's commands bounded (see
// above), on gr, which keeps a context's deadline on its socket
// (ContextTimeoutEnabled).
func goredisBoundedCycle(gr *goredis.Client) cycleFunc {
	return func(ctx context.Context, key string, hold func() error) error {
		token := boundedToken()
		rctx, cancel := bounded(ctx)
		ok, err := gr.SetNX(rctx, key, token, ttl).Result()
		cancel()
		if err != nil {
			return err
		}
		if !ok {
			return lockswap.ErrHeld
		}
		herr := callHold(hold)
		rctx, cancel = bounded(ctx)
		defer cancel()
		if err := gr.EvalSha(rctx, releaseSHA, []string{key}, token).Err(); err != nil {
			return err
		}
		return herr
	}
}

// redigoBoundedCycle is redigoFloorCycle's commands bounded (see above),
// a pooled connection per command.
func redigoBoundedCycle(pool *redigo.Pool) cycleFunc {
	ms := ttl.Milliseconds()
	do := func(ctx context.Context, cmd string, args ...any) (any, error) {
		rctx, cancel := bounded(ctx)
		defer cancel()
		c, err := pool.GetContext(rctx)
		if err != nil {
			return nil, err
		}
		v, err := redigo.DoContext(c, rctx, cmd, args...)
		c.Close()
		return v, err
	}
	return func(ctx context.Context, key string, hold func() error) error {
		token := boundedToken()
		v, err := do(ctx, "SET", key, token, "NX", "PX", ms)
		if err != nil {
			return err
		}
		if v == nil {
			return lockswap.ErrHeld
		}
		herr := callHold(hold)
		if _, err := do(ctx, "EVALSHA", releaseSHA, 1, key, token); err != nil {
			return err
		}
		return herr
	}
}

// rueidisBoundedCycle is rueidisFloorCycle's commands bounded (see
// above), on c.
func rueidisBoundedCycle(c rueidis.Client) cycleFunc {
	ms := ttl.Milliseconds()
	return func(ctx context.Context, key string, hold func() error) error {
		token := boundedToken()
		rctx, cancel := bounded(ctx)
		err := c.Do(rctx, c.B().Set().Key(key).Value(token).Nx().PxMilliseconds(ms).Build()).Error()
		cancel()
		if rueidis.IsRedisNil(err) {
			return lockswap.ErrHeld
		}
		if err != nil {
			return err
		}
		herr := callHold(hold)
		rctx, cancel = bounded(ctx)
		defer cancel()
		if err := c.Do(rctx, c.B().Evalsha().Sha1(releaseSHA).Numkeys(1).Key(key).Arg(token).Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		return herr
	}
}
