// Package goredis adapts go-redis v9 clients to [redisclient.Client], so
// that lockswap's Redis backends can use them. A program that imports it
// links go-redis and not redigo.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// goRedis adapts any go-redis v9 command interface.
type goRedis struct {
	c    redis.Cmdable
	name string
	addr string // Addr
	// guard: the client ignores contexts (ContextTimeoutEnabled is off, a
	// timeout of -2 sets no socket deadline, or the options are unknown),
	// so each command runs on another goroutine (a worker, see package
	// workers) and the adapter returns when the context ends. why says
	// which, for errors and CostNote.
	guard bool
	why   string
}

// New adapts a go-redis v9 client: *redis.Client, *redis.ClusterClient,
// *redis.Ring, or any redis.UniversalClient, as they are. It returns nil for
// a nil client, which the backends reject with lockswap.ErrInvalid.
//
// Set Options.ContextTimeoutEnabled on the client so that the context's
// deadline bounds each command on the socket. Without it go-redis ignores
// contexts (a command to a server that hangs waits for ReadTimeout, 5 s by
// default, per retry), and so it does with a ReadTimeout or WriteTimeout
// of -2, which sets no socket deadline at all (-1 sets the context's
// alone); the adapter then keeps the deadlines another way: it
// hands each command to another goroutine and returns when the context
// ends, while the abandoned command finishes on the client's own timeouts
// (with -2, when the server answers or the connection breaks: until then
// it holds its connection and the goroutine).
// That costs a hand-over per command: the goroutines are workers the
// adapter keeps, shared by the process's adapters, and a worker exits
// after 100–200 ms without a command. The same goes, with
// ContextTimeoutEnabled, for a context that can be cancelled (with or
// without a deadline): go-redis would not notice the cancellation until
// the deadline or ReadTimeout.
func New(c redis.Cmdable) redisclient.Client {
	if redisclient.IsNil(c) {
		return nil
	}
	name, addr := "go-redis", ""
	// contexts: the client keeps a context's deadline on its sockets
	// (ContextTimeoutEnabled), unknown for a Cmdable of another type.
	// timeouts: its ReadTimeout and WriteTimeout, where -2 keeps go-redis
	// from setting any socket deadline, even the context's (-1: the
	// context's alone). A ring's options keep them as given, a cluster's
	// too but for -1 (made 0, the same); a *redis.Client's are normalized
	// (-2 to -1, -1 to 0) and are moved back by one.
	var (
		contexts, known bool
		timeouts        [2]time.Duration
	)
	switch cc := c.(type) {
	case *redis.Client:
		o := cc.Options()
		name, contexts, known = "go-redis "+o.Addr, o.ContextTimeoutEnabled, true
		timeouts = [2]time.Duration{o.ReadTimeout - 1, o.WriteTimeout - 1}
		switch {
		case o.Addr == "FailoverClient":
			// A failover client (sentinel) does not say which master set
			// it follows: its address is unknown.
			name = "go-redis failover"
		case o.Network == "unix":
			addr = fmt.Sprintf("unix:%s/%d", o.Addr, o.DB)
		default:
			addr = adapt.Addr(o.Addr, o.DB)
		}
	case *redis.ClusterClient:
		o := cc.Options()
		name, contexts, known = fmt.Sprintf("go-redis cluster %v", o.Addrs), o.ContextTimeoutEnabled, true
		timeouts = [2]time.Duration{o.ReadTimeout, o.WriteTimeout}
		if hosts := normalizeAll(o.Addrs); hosts != "" {
			addr = "cluster:" + hosts
		}
	case *redis.Ring:
		o := cc.Options()
		name, contexts, known = "go-redis ring", o.ContextTimeoutEnabled, true
		timeouts = [2]time.Duration{o.ReadTimeout, o.WriteTimeout}
		var addrs []string
		for _, a := range o.Addrs {
			addrs = append(addrs, a)
		}
		if hosts := normalizeAll(addrs); hosts != "" {
			addr = fmt.Sprintf("ring:%s/%d", hosts, o.DB)
		}
	}
	g := &goRedis{c: c, name: name, addr: addr, guard: true}
	switch {
	case !known:
		g.why = fmt.Sprintf("the adapter cannot read the options of a %T and takes it to ignore contexts", c)
	case !contexts:
		g.why = "the client ignores contexts without Options.ContextTimeoutEnabled"
	case timeouts[0] < -1 || timeouts[1] < -1:
		g.why = "the client sets no socket deadline for reads or for writes, not even the context's (a ReadTimeout or WriteTimeout of -2)"
	default:
		g.guard = false
	}
	return g
}

// normalizeAll returns the sorted normalized addresses joined by commas,
// or "" when one of them is not host:port.
func normalizeAll(addrs []string) string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		n := adapt.HostPort(a)
		if n == "" {
			return ""
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}

// Addr implements [redisclient.Client]: from the client's Options (see
// there for the forms); "" for a failover client or another Cmdable.
func (g *goRedis) Addr() string { return g.addr }

// direct reports whether a command under ctx can go to the client on the
// caller's goroutine: ctx cannot be cancelled (no Done channel), and it
// has no deadline or the client keeps it on its sockets (not guard). It
// returns the context to give go-redis then: ctx, or for a deadline one
// that ends at it (adapt.WithDone, mostly without a timer of its own),
// as go-redis waits for a pooled connection, when all are in use, until
// its PoolTimeout (ReadTimeout + 1 s, or 30 s), and again on each of its
// retries, unless Done closes (it waits for a new connection's dial the
// same way); call
// the function when the command has returned. go-redis with
// ContextTimeoutEnabled puts a context's deadline on the socket and does
// not watch for cancellation while it dials, writes or reads: a context
// that can be cancelled would wait for its deadline (the kit's request
// contexts have one, up to lockswap.RequestTimeout, and end soon after the
// caller's cancellation) or, without one, for ReadTimeout (5 s by
// default) on a server that hangs. Such a command goes through bounded
// (or a call), which returns when ctx is cancelled.
func (g *goRedis) direct(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	if ctx.Done() != nil {
		return ctx, nil, false
	}
	if _, ok := ctx.Deadline(); !ok {
		return ctx, noCancel, true
	}
	// A deadline without a Done channel (the kit's request under a caller
	// that cannot be cancelled) still ends: a client that ignores contexts
	// must not be left to its own timeouts then either.
	if g.guard {
		return ctx, nil, false
	}
	dctx, cancel := adapt.WithDone(ctx)
	return dctx, cancel, true
}

// noCancel is the function of a context direct did not make.
func noCancel() {}

// bounded runs f for a client that ignores contexts on its sockets (or,
// for g with ContextTimeoutEnabled, under a context that can be
// cancelled, which go-redis does not watch; see direct): it
// returns as soon as ctx ends or its deadline passes, leaving f to finish
// in the background on the client's own timeouts. For a client that
// ignores contexts f gets a context of its own, detached from ctx but
// ended at the same time: the client still obeys it between its retries
// and while it waits for a pooled connection, so an abandoned command is
// not sent again after the deadline. With ContextTimeoutEnabled f gets
// ctx itself (go-redis keeps its deadline), which saves the detached
// context and the timer.
//
// f must not use memory the caller may reuse once bounded returns: the
// callers give it copies of the slices they were given (keys, args), as
// an abandoned command may still be writing them.
func bounded[T any](g *goRedis, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	if !g.guard {
		// go-redis keeps ctx's deadline itself, on the socket and while
		// it waits for a connection: only the cancellation needs
		// watching, and f can have ctx as it is (it has ended when f is
		// abandoned).
		ch := make(chan result, 1)
		workers.Run(func() {
			v, err := f(ctx)
			ch <- result{v, err}
		})
		select {
		case r := <-ch:
			return r.v, r.err
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("%w (go-redis command abandoned: go-redis does not watch a context's cancellation)", ctx.Err())
		}
	}
	var (
		fctx    context.Context
		cancel  context.CancelFunc
		expired <-chan time.Time
	)
	if d, ok := ctx.Deadline(); ok {
		fctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		expired = t.C
	} else {
		fctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	ch := make(chan result, 1)
	workers.Run(func() {
		defer cancel()
		v, err := f(fctx)
		ch <- result{v, err}
	})
	var zero T
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		cancel()
		return zero, fmt.Errorf("%w (go-redis command abandoned: %s)", ctx.Err(), g.why)
	case <-expired:
		return zero, fmt.Errorf("%w (go-redis command abandoned: %s)", context.DeadlineExceeded, g.why)
	}
}

func (g *goRedis) String() string { return g.name }

func goRedisErr(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.Nil) {
		return &redisclient.ReplyError{Msg: re.Error()}
	}
	return err
}

func (g *goRedis) setnxpxOnce(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ok, err := g.c.SetNX(ctx, key, value, time.Duration(adapt.Millis(ttl))*time.Millisecond).Result()
	return ok, goRedisErr(err)
}

func (g *goRedis) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.setnxpxOnce(dctx, key, value, ttl)
	}
	return bounded(g, ctx, func(ctx context.Context) (bool, error) { return g.setnxpxOnce(ctx, key, value, ttl) })
}

func (g *goRedis) setnxOnce(ctx context.Context, key, value string) (bool, error) {
	ok, err := g.c.SetNX(ctx, key, value, 0).Result()
	return ok, goRedisErr(err)
}

func (g *goRedis) SetNX(ctx context.Context, key, value string) (bool, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.setnxOnce(dctx, key, value)
	}
	return bounded(g, ctx, func(ctx context.Context) (bool, error) { return g.setnxOnce(ctx, key, value) })
}

func (g *goRedis) getOnce(ctx context.Context, key string) (string, bool, error) {
	v, err := g.c.Get(ctx, key).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	return v, err == nil, goRedisErr(err)
}

func (g *goRedis) Get(ctx context.Context, key string) (string, bool, error) {
	type found struct {
		v  string
		ok bool
	}
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.getOnce(dctx, key)
	}
	r, err := bounded(g, ctx, func(ctx context.Context) (found, error) {
		v, ok, err := g.getOnce(ctx, key)
		return found{v, ok}, err
	})
	return r.v, r.ok, err
}

func (g *goRedis) getsetOnce(ctx context.Context, key, value string) (string, bool, error) {
	v, err := g.c.GetSet(ctx, key, value).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	return v, err == nil, goRedisErr(err)
}

func (g *goRedis) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	type found struct {
		v  string
		ok bool
	}
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.getsetOnce(dctx, key, value)
	}
	r, err := bounded(g, ctx, func(ctx context.Context) (found, error) {
		v, ok, err := g.getsetOnce(ctx, key, value)
		return found{v, ok}, err
	})
	return r.v, r.ok, err
}

func (g *goRedis) delOnce(ctx context.Context, keys ...string) (int64, error) {
	n, err := g.c.Del(ctx, keys...).Result()
	return n, goRedisErr(err)
}

func (g *goRedis) Del(ctx context.Context, keys ...string) (int64, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.delOnce(dctx, keys...)
	}
	keys = slices.Clone(keys)
	return bounded(g, ctx, func(ctx context.Context) (int64, error) { return g.delOnce(ctx, keys...) })
}

func (g *goRedis) timeOnce(ctx context.Context) (time.Time, error) {
	t, err := g.c.Time(ctx).Result()
	return t, goRedisErr(err)
}

func (g *goRedis) Time(ctx context.Context) (time.Time, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.timeOnce(dctx)
	}
	return bounded(g, ctx, func(ctx context.Context) (time.Time, error) { return g.timeOnce(ctx) })
}

func (g *goRedis) runOnce(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	v, err := g.c.EvalSha(ctx, s.SHA(), keys, args...).Result()
	if err != nil && adapt.IsNoScript(goRedisErr(err)) {
		v, err = g.c.Eval(ctx, s.Source(), keys, args...).Result()
	}
	if err == redis.Nil {
		return nil, nil
	}
	return v, goRedisErr(err)
}

func (g *goRedis) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.runOnce(dctx, s, keys, args...)
	}
	if ctx.Done() != nil {
		return g.runCall(ctx, s, keys, args)
	}
	keys, args = slices.Clone(keys), adapt.Detach(args)
	return bounded(g, ctx, func(ctx context.Context) (any, error) { return g.runOnce(ctx, s, keys, args...) })
}

// doer is the part of go-redis clients that runs arbitrary commands; every
// client type has it, but redis.Cmdable does not declare it.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

func (g *goRedis) doOnce(ctx context.Context, args ...any) (any, error) {
	d, ok := g.c.(doer)
	if !ok {
		return nil, fmt.Errorf("redisclient: %T cannot run arbitrary commands", g.c)
	}
	v, err := d.Do(ctx, args...).Result()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, goRedisErr(err)
	}
	return adapt.Normalize(v, nil), nil
}

func (g *goRedis) Do(ctx context.Context, args ...any) (any, error) {
	if dctx, cancel, ok := g.direct(ctx); ok {
		defer cancel()
		return g.doOnce(dctx, args...)
	}
	args = adapt.Detach(args)
	return bounded(g, ctx, func(ctx context.Context) (any, error) { return g.doOnce(ctx, args...) })
}

// CostNote implements [redisclient.CostNoter]: for a client that does
// not keep a context's deadline on its sockets (without
// Options.ContextTimeoutEnabled, with a timeout of -2, or one whose
// options New cannot read) it says why, and what that costs: each
// command a hand-over to another goroutine and a timer (and, but for the
// lock's own commands under a context that can be cancelled, a context),
// and an abandoned command holds its connection to ReadTimeout (with -2,
// until the server answers). With ContextTimeoutEnabled only a command
// that can be cancelled is handed over (go-redis does not watch a
// cancellation).
func (g *goRedis) CostNote() string {
	if !g.guard {
		return ""
	}
	return "go-redis: " + g.why + ", so each command is handed to another goroutine to keep the call's deadline, with a timer (and a context, but for the lock's own commands under a context that can be cancelled), and a command abandoned at its deadline runs on to the client's ReadTimeout (without a socket deadline, until the server answers or the connection breaks); with ContextTimeoutEnabled: true and no timeout of -2 go-redis keeps the deadline itself and only a command that can be cancelled is handed over (docs/configuration.md)"
}
