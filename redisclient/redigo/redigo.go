// Package redigo adapts redigo connection pools to [redisclient.Client], so
// that lockswap's Redis backends can use them. A program that imports it
// links redigo and not go-redis.
package redigo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
)

type redigo struct {
	pool *redis.Pool
	name string
	addr string // Addr; "" when unknown
}

// New adapts a redigo connection pool. Connections must support
// redis.ConnWithContext (those from redis.Dial do), so that every command is
// bounded by its context. It returns nil for a nil pool, which the backends
// reject with lockswap.ErrInvalid.
func New(pool *redis.Pool) redisclient.Client {
	if pool == nil {
		return nil
	}
	return &redigo{pool: pool, name: "redigo pool"}
}

// NewNamed is [New] with the address the pool dials, "host:port" or
// "host:port/db" (database 0 when not given). It names the client in
// messages and is its identity ([redisclient.Client.Addr]), by which
// redlock refuses the same master twice and migrate refuses one Redis key
// for both locks. A pool adapted by New, or given a name that is not an
// address, has no known address: it is the same as another client only
// when it is that client. The name must not contain a password.
func NewNamed(pool *redis.Pool, name string) redisclient.Client {
	if pool == nil {
		return nil
	}
	return &redigo{pool: pool, name: "redigo " + name, addr: adapt.ParseAddr(name)}
}

func (r *redigo) String() string { return r.name }

// Addr implements [redisclient.Client]: the address given to NewNamed, or
// "" when unknown.
func (r *redigo) Addr() string { return r.addr }

func redigoErr(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(redis.Error); ok {
		return &redisclient.ReplyError{Msg: string(re)}
	}
	var re redis.Error
	if errors.As(err, &re) {
		// An error reply wrapped by the dial (AUTH, SELECT): keep the text.
		return fmt.Errorf("%v: %w", err, &redisclient.ReplyError{Msg: string(re)})
	}
	return err
}

// normalize turns redigo replies into the package's common forms.
func normalize(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
		return x
	}
	return v
}

// get takes a pooled connection. A pool that waits for one when all are
// in use (Wait, with MaxActive) watches only ctx's Done while it waits:
// a context with a deadline and no Done channel (the kit's request under
// a caller's context.Background) would wait past its deadline, for as
// long as the connections' commands take, so it waits under a context
// that ends at the deadline (adapt.WithDone).
func (r *redigo) get(ctx context.Context) (redis.Conn, error) {
	if r.pool.Wait && r.pool.MaxActive > 0 {
		wctx, cancel := adapt.WithDone(ctx)
		defer cancel()
		ctx = wctx
	}
	return r.pool.GetContext(ctx)
}

// do runs cmd with args on a pooled connection. redigo's DoContext writes
// the command from a goroutine of its own and returns when ctx ends, while
// that goroutine may still be reading args: they must not be memory the
// caller reuses (the adapter's methods build them afresh, Do and Run copy
// theirs with adapt.Detach).
func (r *redigo) do(ctx context.Context, cmd string, args ...any) (any, error) {
	conn, err := r.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("redigo: get connection: %w", redigoErr(err))
	}
	v, err := redis.DoContext(conn, ctx, cmd, args...)
	conn.Close()
	return v, redigoErr(err)
}

func (r *redigo) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	v, err := r.do(ctx, "SET", key, value, "NX", "PX", adapt.Millis(ttl))
	return v != nil && err == nil, err
}

func (r *redigo) SetNX(ctx context.Context, key, value string) (bool, error) {
	v, err := r.do(ctx, "SETNX", key, value)
	n, _ := v.(int64)
	return n == 1, err
}

func (r *redigo) getLike(ctx context.Context, cmd string, args ...any) (string, bool, error) {
	v, err := r.do(ctx, cmd, args...)
	if err != nil || v == nil {
		return "", false, err
	}
	b, ok := v.([]byte)
	if !ok {
		return "", false, fmt.Errorf("redigo %s: unexpected reply %T", cmd, v)
	}
	return string(b), true, nil
}

func (r *redigo) Get(ctx context.Context, key string) (string, bool, error) {
	return r.getLike(ctx, "GET", key)
}

func (r *redigo) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	return r.getLike(ctx, "GETSET", key, value)
}

func (r *redigo) Del(ctx context.Context, keys ...string) (int64, error) {
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	v, err := r.do(ctx, "DEL", args...)
	n, _ := v.(int64)
	return n, err
}

func (r *redigo) Time(ctx context.Context) (time.Time, error) {
	v, err := r.do(ctx, "TIME")
	if err != nil {
		return time.Time{}, err
	}
	return adapt.ParseTime(normalize(v))
}

func (r *redigo) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	conn, err := r.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("redigo: get connection: %w", redigoErr(err))
	}
	defer conn.Close()
	cmdArgs := make([]any, 0, 2+len(keys)+len(args))
	cmdArgs = append(cmdArgs, s.SHA(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	// Copies of the caller's buffers: see do.
	cmdArgs = adapt.AppendDetached(cmdArgs, args)
	v, err := redis.DoContext(conn, ctx, "EVALSHA", cmdArgs...)
	if err = redigoErr(err); err != nil && adapt.IsNoScript(err) {
		cmdArgs[0] = s.Source()
		v, err = redis.DoContext(conn, ctx, "EVAL", cmdArgs...)
		err = redigoErr(err)
	}
	if err != nil {
		return nil, err
	}
	return normalize(v), nil
}

func (r *redigo) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("redigo: empty command")
	}
	cmd, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("redigo: command name %v is not a string", args[0])
	}
	// A copy of the caller's arguments: see do.
	v, err := r.do(ctx, cmd, adapt.Detach(args[1:])...)
	if err != nil {
		return nil, err
	}
	return normalize(v), nil
}

// Split implements [redisclient.Splitter].
func (r *redigo) Split(ctx context.Context) (redisclient.SplitConn, error) {
	c, err := r.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("redigo: get connection: %w", redigoErr(err))
	}
	return redigoSplit{c: c}, nil
}

type redigoSplit struct{ c redis.Conn }

func (s redigoSplit) Send(cmd string, args ...any) error { return s.c.Send(cmd, args...) }
func (s redigoSplit) Flush() error                       { return s.c.Flush() }
func (s redigoSplit) Close() error                       { return s.c.Close() }

func (s redigoSplit) Receive(timeout time.Duration) (any, error) {
	// ReceiveWithTimeout sets a read deadline on the connection: no
	// goroutine per reply.
	v, err := redis.ReceiveWithTimeout(s.c, timeout)
	if err != nil {
		return nil, redigoErr(err)
	}
	return normalize(v), nil
}
