package goredis

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
)

// processor is the part of go-redis clients that runs a command built by
// the caller; every client type has it, but redis.Cmdable does not declare
// it.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// SetNXPXGet implements [redisclient.SetGetter]: SET key value NX PX ttl
// GET, whose reply is nil when it set the key. go-redis turns a nil reply
// into the error redis.Nil and runs its retry checks on it, a chain of
// errors.As that costs about 17 allocations per acquire. The adapter reads
// the reply unparsed instead (redis.RawCmd) and takes the two answers a
// lock expects from it: nil (set) and a string (held), and the two error
// replies go-redis only returns (finalError). Any other error reply goes
// to the command again as go-redis runs it, so that go-redis's own handling
// of READONLY, LOADING, MOVED and the like applies: an error reply means
// the server ran nothing.
func (g *goRedis) SetNXPXGet(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.setGetOnce(dctx, key, value, ttl)
	}
	if ctx.Done() != nil {
		return g.setGetCall(ctx, key, value, ttl)
	}
	return bounded(g, ctx, func(ctx context.Context) (bool, error) { return g.setGetOnce(ctx, key, value, ttl) })
}

func (g *goRedis) setGetOnce(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	p, ok := g.c.(processor)
	if !ok {
		return g.setGetParsed(ctx, key, value, ttl)
	}
	cmd := redis.NewRawCmd(ctx, "set", key, value, "nx", "px", adapt.Millis(ttl), "get")
	if err := p.Process(ctx, cmd); err != nil {
		return false, goRedisErr(err)
	}
	raw := cmd.Val()
	set, held, err := setGetReply(raw)
	if err != nil {
		return false, fmt.Errorf("redisclient: SET NX PX GET: %w", err)
	}
	if !set && !held {
		if re := finalError(raw); re != nil {
			return false, re
		}
		return g.setGetParsed(ctx, key, value, ttl)
	}
	return set, nil
}

// setGetParsed runs SET key value NX PX ttl GET as go-redis runs any
// command (redisclient.SetGetArgs on Do).
func (g *goRedis) setGetParsed(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	var a redisclient.SetGetArgs
	a.Fill(key, value, redisclient.TTLArg(ttl))
	v, err := g.doOnce(ctx, a[:]...)
	if err != nil {
		return false, err
	}
	return v == nil, nil
}

// finalError returns the error reply raw as a ReplyError when go-redis
// would do nothing with it but return it, so that it costs no second
// request: WRONGTYPE (a key of another type, on the error path of every
// acquire that meets one) and "ERR syntax error" (a Redis before 7.0,
// once per Locker); nil for any other reply.
func finalError(raw []byte) error {
	if len(raw) == 0 || raw[0] != '-' {
		return nil
	}
	msg, _, _ := bytes.Cut(raw[1:], []byte("\r\n"))
	if bytes.HasPrefix(msg, []byte("WRONGTYPE ")) || bytes.HasPrefix(msg, []byte("ERR syntax error")) {
		return &redisclient.ReplyError{Msg: string(msg)}
	}
	return nil
}

// setGetReply reads the raw RESP reply of SET NX PX GET: set for a null
// (RESP2 "$-1", RESP3 "_"), held for a bulk string (the holder's value),
// neither for an error reply ("-" or RESP3's "!"), and an error for any
// other reply.
func setGetReply(raw []byte) (set, held bool, err error) {
	if len(raw) == 0 {
		return false, false, fmt.Errorf("empty reply")
	}
	switch raw[0] {
	case '_':
		return true, false, nil
	case '$':
		return bytes.HasPrefix(raw, []byte("$-1\r")), !bytes.HasPrefix(raw, []byte("$-1\r")), nil
	case '-', '!':
		return false, false, nil
	}
	return false, false, fmt.Errorf("unexpected reply of RESP type %q", raw[0])
}
