package redisclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// goRedis adapts any go-redis v9 command interface.
type goRedis struct {
	c    redis.Cmdable
	name string
}

// GoRedis adapts a go-redis v9 client: *redis.Client, *redis.ClusterClient,
// *redis.Ring, or any redis.UniversalClient, as they are. It returns nil for
// a nil client, which the backends reject with lockswap.ErrInvalid.
//
// Set Options.ContextTimeoutEnabled on the client so that the context's
// deadline bounds each command (Redlock's per-instance timeout relies on it).
func GoRedis(c redis.Cmdable) Client {
	if IsNil(c) {
		return nil
	}
	name := "go-redis"
	switch cc := c.(type) {
	case *redis.Client:
		name = "go-redis " + cc.Options().Addr
	case *redis.ClusterClient:
		name = fmt.Sprintf("go-redis cluster %v", cc.Options().Addrs)
	case *redis.Ring:
		name = "go-redis ring"
	}
	return &goRedis{c: c, name: name}
}

func (g *goRedis) String() string { return g.name }

func goRedisErr(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.Nil) {
		return &ReplyError{Msg: re.Error()}
	}
	return err
}

func (g *goRedis) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ok, err := g.c.SetNX(ctx, key, value, time.Duration(millis(ttl))*time.Millisecond).Result()
	return ok, goRedisErr(err)
}

func (g *goRedis) SetNX(ctx context.Context, key, value string) (bool, error) {
	ok, err := g.c.SetNX(ctx, key, value, 0).Result()
	return ok, goRedisErr(err)
}

func (g *goRedis) Get(ctx context.Context, key string) (string, bool, error) {
	v, err := g.c.Get(ctx, key).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	return v, err == nil, goRedisErr(err)
}

func (g *goRedis) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	v, err := g.c.GetSet(ctx, key, value).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	return v, err == nil, goRedisErr(err)
}

func (g *goRedis) Del(ctx context.Context, keys ...string) (int64, error) {
	n, err := g.c.Del(ctx, keys...).Result()
	return n, goRedisErr(err)
}

func (g *goRedis) Time(ctx context.Context) (time.Time, error) {
	t, err := g.c.Time(ctx).Result()
	return t, goRedisErr(err)
}

func (g *goRedis) Run(ctx context.Context, s *Script, keys []string, args ...any) (any, error) {
	v, err := g.c.EvalSha(ctx, s.sha, keys, args...).Result()
	if err != nil && isNoScript(goRedisErr(err)) {
		v, err = g.c.Eval(ctx, s.src, keys, args...).Result()
	}
	if err == redis.Nil {
		return nil, nil
	}
	return v, goRedisErr(err)
}

// doer is the part of go-redis clients that runs arbitrary commands; every
// client type has it, but redis.Cmdable does not declare it.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

func (g *goRedis) Do(ctx context.Context, args ...any) (any, error) {
	d, ok := g.c.(doer)
	if !ok {
		return nil, fmt.Errorf("redisclient: %T cannot run arbitrary commands", g.c)
	}
	v, err := d.Do(ctx, args...).Result()
	if err == redis.Nil {
		return nil, nil
	}
	return v, goRedisErr(err)
}
