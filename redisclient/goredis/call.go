package goredis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// call is one command of a lock's hot path (the acquire's SET NX PX GET,
// the release's and extend's scripts) under a context that can be
// cancelled: the command runs on a worker goroutine (workers.Run) and the caller
// returns when ctx ends (see bounded, which serves the other commands the
// same way). With ContextTimeoutEnabled go-redis keeps ctx's deadline on
// the socket; without it go-redis still obeys ctx between its retries and
// while it waits for a connection, so an abandoned command is not sent
// again once ctx has ended, and ends on the client's own timeouts. (A
// context with a deadline and no Done channel, which go-redis without
// ContextTimeoutEnabled would never see end, goes through bounded.) A
// call holds what bounded allocates
// per command — the closure, the channel, the copies of the arguments —
// and is pooled: it goes back to the pool only once its command has
// returned, put there by the caller once it has read the result or, when
// the caller has gone, by the command's goroutine. So the copies a client
// may still be reading are never overwritten under it, and the common
// case allocates nothing of the adapter's own.
type call struct {
	g      *goRedis
	ctx    context.Context
	op     callOp
	key    string // opSetGet
	value  string // opSetGet
	ttl    time.Duration
	script *redisclient.Script // opRun
	keys   []string            // opRun: a copy of the caller's
	args   []any               // opRun: a copy of the caller's (adapt.AppendDetached)

	v   any  // opRun's reply
	set bool // opSetGet's reply
	err error

	state atomic.Uint32 // callRunning, callFinished or callAbandoned
	done  chan struct{} // one value when the command has returned to a caller still waiting
	exec  func()        // c.execute, bound once per call value
	timer *time.Timer   // stopped; armed by wait for a client that ignores contexts
}

type callOp uint8

const (
	opSetGet callOp = iota + 1
	opRun
)

const (
	callRunning uint32 = iota
	callFinished
	callAbandoned
)

// maxPooledArgs is the most arguments (keys, values) a pooled call keeps
// room for: a lock's scripts take a few, and a call that carried more is
// dropped instead of kept with a large backing array.
const maxPooledArgs = 16

// calls holds the calls whose commands have returned (its New is set in
// init: a call refers back to the pool).
var calls sync.Pool

func init() {
	calls.New = func() any {
		c := &call{done: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
		c.timer.Stop()
		c.exec = c.execute
		return c
	}
}

func newCall(g *goRedis, ctx context.Context, op callOp) *call {
	c := calls.Get().(*call)
	c.g, c.ctx, c.op = g, ctx, op
	return c
}

// execute runs the command and hands the call over: to the caller when it
// still waits, otherwise back to the pool.
func (c *call) execute() {
	switch c.op {
	case opSetGet:
		c.set, c.err = c.g.setGetOnce(c.ctx, c.key, c.value, c.ttl)
	case opRun:
		c.v, c.err = c.g.runOnce(c.ctx, c.script, c.keys, c.args...)
	}
	if c.state.CompareAndSwap(callRunning, callFinished) {
		c.done <- struct{}{}
		return
	}
	c.recycle() // the caller has gone: nobody else holds c
}

// wait starts the command and returns nil once it has returned (its
// results are in c, which the caller then recycles), or an error as soon
// as ctx is cancelled or, for a client that ignores contexts, its
// deadline passes (a context's Done may close late: the call keeps the
// deadline with a timer of its own, as bounded does); c then belongs to
// the command's goroutine and the caller must not touch it again.
func (c *call) wait(ctx context.Context) error {
	guard, why := c.g.guard, c.g.why // c is not ours to read once abandoned
	var expired <-chan time.Time
	if d, ok := ctx.Deadline(); ok && guard {
		c.timer.Reset(time.Until(d))
		expired = c.timer.C
	}
	workers.Run(c.exec)
	var err error
	select {
	case <-c.done:
		if expired != nil {
			c.timer.Stop()
		}
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = context.DeadlineExceeded
	}
	if expired != nil {
		c.timer.Stop() // before c may go back to the pool
	}
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		<-c.done // it returned meanwhile: its result counts
		return nil
	}
	if guard {
		return fmt.Errorf("%w (go-redis command abandoned: %s)", err, why)
	}
	return fmt.Errorf("%w (go-redis command abandoned: go-redis does not watch a context's cancellation)", err)
}

// recycle clears c and puts it back in the pool; its command has returned
// and nobody else holds c.
func (c *call) recycle() {
	if cap(c.keys) > maxPooledArgs || cap(c.args) > maxPooledArgs {
		return
	}
	clear(c.keys)
	clear(c.args)
	c.g, c.ctx, c.op, c.script, c.v, c.err = nil, nil, 0, nil, nil, nil
	c.key, c.value, c.ttl, c.set = "", "", 0, false
	c.keys, c.args = c.keys[:0], c.args[:0]
	c.state.Store(callRunning)
	calls.Put(c)
}

// setGetCall runs SET NX PX GET as a call (see [call]).
func (g *goRedis) setGetCall(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c := newCall(g, ctx, opSetGet)
	c.key, c.value, c.ttl = key, value, ttl
	if err := c.wait(ctx); err != nil {
		return false, err
	}
	set, err := c.set, c.err
	c.recycle()
	return set, err
}

// runCall runs a script as a call (see [call]), on copies of keys and args.
func (g *goRedis) runCall(ctx context.Context, s *redisclient.Script, keys []string, args []any) (any, error) {
	c := newCall(g, ctx, opRun)
	c.script = s
	c.keys = append(c.keys, keys...)
	c.args = adapt.AppendDetached(c.args, args)
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	v, err := c.v, c.err
	c.recycle()
	return v, err
}
