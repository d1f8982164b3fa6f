package rueidis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// splitter is the grouped adapter of a single-server client (Grouped): it
// implements [redisclient.Splitter] on top of the group commit, so that
// redlock's fan-out hands its commands to every instance's batch from the
// caller's goroutine and then waits for the replies, instead of one
// goroutine per instance waiting for each.
type splitter struct{ *adapter }

// Split implements [redisclient.Splitter]. The conn it returns holds no
// connection: its commands go in the adapter's batches (group.go), a
// command flushed while nothing else of the adapter's is in flight in a
// batch of its own, sent by a worker goroutine. Each command is bounded
// by ctx, as with [redisclient.Client.Do], and Receive by its timeout. A command
// flushed after ctx has ended still goes, bounded by [lateSend] of its
// own, and Receive waits for its reply that long even when given a
// shorter timeout: on a connection a request written after the deadline
// (the fan-out's second request to an instance whose first reply was read
// late: SET NX PX after a refused SET NX PX GET, EVAL after the NOSCRIPT
// of a script NewScript did not make) gets a short read timeout (1 ms)
// for a reply that travels no further than the socket, while here it goes
// through goroutines (the sender, rueidis's writer and reader), which a
// loaded machine delays. The EVALSHA of a script NewScript made is
// followed by its EVAL as soon as NOSCRIPT comes (scriptFallback).
func (s splitter) Split(ctx context.Context) (redisclient.SplitConn, error) {
	sc := splitConns.Get().(*splitConn)
	sc.a, sc.ctx = s.adapter, ctx
	return sc, nil
}

// splitConn is one [splitter.Split]: the commands sent and not yet
// flushed, and those flushed and not yet received, in order.
type splitConn struct {
	a        *adapter
	ctx      context.Context
	unsent   []queued
	inflight []*member
	next     int                  // inflight[next] is the next reply to receive
	cancels  []context.CancelFunc // of the contexts of commands flushed after ctx ended
}

// queued is a command sent on a split conn and not yet flushed.
type queued struct {
	cmd rueidis.Completed
	fb  scriptFallback
}

// scriptFallback is what the EVAL of a script takes, for a split conn's
// EVALSHA of a script that NewScript made (redisclient.ScriptBySHA): a
// NOSCRIPT reply (the server restarted, or its scripts were flushed) gets
// the EVAL at once, from the goroutine that got the reply, as Run sends
// it, rather than when the fan-out reads that reply, which may be after
// the replies of slower instances and past its deadline.
type scriptFallback struct {
	script       *redisclient.Script // nil: no fallback
	keys         [4]string
	argv         [6]string
	nkeys, nargv int
}

// lateSend bounds a command flushed after its Split's context ended: half
// of lockswap.DeadlineGrace, the whole of which the call may still use.
// 10 ms, as it was, was often used up on a busy machine by the hops
// between goroutines alone.
const lateSend = 50 * time.Millisecond

var splitConns = sync.Pool{New: func() any { return new(splitConn) }}

// Send builds cmd with args and keeps it for Flush.
func (sc *splitConn) Send(cmd string, args ...any) error {
	sc.unsent = append(sc.unsent, queued{})
	q := &sc.unsent[len(sc.unsent)-1]
	c, err := sc.a.build(cmd, args, &q.fb)
	if err != nil {
		sc.unsent = sc.unsent[:len(sc.unsent)-1]
		return err
	}
	q.cmd = c
	return nil
}

// Flush hands the commands sent to the adapter's next batch.
func (sc *splitConn) Flush() error {
	ctx, late := sc.ctx, false
	for i := range sc.unsent {
		if !late && ended(ctx) {
			// From this command on, the context has ended: late sends
			// (lateSend), decided per command, so that a deadline passing
			// during the loop does not drop the rest.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(sc.ctx), lateSend)
			sc.cancels = append(sc.cancels, cancel)
			ctx, late = lctx, true
		}
		sc.inflight = append(sc.inflight, sc.a.start(ctx, &sc.unsent[i], late))
	}
	clear(sc.unsent)
	sc.unsent = sc.unsent[:0]
	return nil
}

// ended reports whether ctx has ended, or passed its deadline although its
// timer has not run yet (endErr): no command is sent under it (send).
func ended(ctx context.Context) bool { return endErr(ctx) != nil }

// endErr returns why ctx has ended: its error, or
// [context.DeadlineExceeded] when its deadline has passed although its
// timer has not run yet (a busy machine runs timers late). nil while it
// has not ended.
func endErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= 0 { // the monotonic clock alone
		return context.DeadlineExceeded
	}
	return nil
}

// Receive waits for the reply of the oldest command flushed and not yet
// received, at most timeout and until the command's context ends. A
// reply that has already come is returned even when both have passed.
func (sc *splitConn) Receive(timeout time.Duration) (any, error) {
	if sc.next == len(sc.inflight) {
		return nil, fmt.Errorf("redisclient/rueidis: Receive without a command in flight")
	}
	m := sc.inflight[sc.next]
	sc.inflight[sc.next] = nil
	sc.next++
	if m.late {
		timeout = max(timeout, lateSend)
	}
	return result(sc.a.wait(m, timeout))
}

// Close forgets the commands not received (their batches answer into
// buffers no one reads; a late command is given up) and returns sc to its
// pool.
func (sc *splitConn) Close() error {
	for _, cancel := range sc.cancels {
		cancel()
	}
	clear(sc.cancels)
	sc.cancels = sc.cancels[:0]
	clear(sc.unsent)
	clear(sc.inflight)
	sc.a, sc.ctx, sc.unsent, sc.inflight, sc.next = nil, nil, sc.unsent[:0], sc.inflight[:0], 0
	splitConns.Put(sc)
	return nil
}

// start hands cmd to the adapter's next batch and returns its member,
// whose done channel gets the reply: the batch in the making when one is
// in flight, else a batch of its own, sent at once by a worker goroutine
// (package workers). late marks a command flushed after its Split's
// context ended.
func (a *adapter) start(ctx context.Context, q *queued, late bool) *member {
	m := members.Get().(*member)
	m.ctx, m.cmd, m.late, m.fb = ctx, q.cmd, late, q.fb
	cmd := q.cmd
	if err := endErr(ctx); err != nil {
		m.done <- rueidis.NewErrorResult(err)
		return m
	}
	if cmd.IsBlock() {
		// It would hold up a batch: alone, beside the batches.
		workers.Run(func() { m.done <- a.send(m.ctx, m.cmd) })
		return m
	}
	g := &a.group
	g.mu.Lock()
	if g.busy {
		g.pending = append(g.pending, m)
		g.mu.Unlock()
		return m
	}
	g.busy = true
	g.mu.Unlock()
	workers.Run(func() { a.sendAlone(m) })
	return m
}

// sendAlone sends m, the command of a Split flushed while nothing of the
// adapter's was in flight, under its caller's context, and then the
// commands that gathered meanwhile.
func (a *adapter) sendAlone(m *member) {
	defer a.sendPending()
	m.done <- a.evalOnNoScript(m.ctx, m, a.send(m.ctx, m.cmd))
}

// evalOnNoScript returns r, m's reply, unless m is an EVALSHA with a
// fallback and r is NOSCRIPT: then it sends the script's EVAL under ctx
// and returns that reply.
func (a *adapter) evalOnNoScript(ctx context.Context, m *member, r rueidis.RedisResult) rueidis.RedisResult {
	fb := &m.fb
	if fb.script == nil {
		return r
	}
	if re, ok := rueidis.IsRedisErr(r.Error()); !ok || !strings.HasPrefix(re.Error(), "NOSCRIPT") {
		return r
	}
	if err := endErr(m.ctx); err != nil {
		// ctx may be its batch's, which ends at the latest deadline of
		// the batch: m's caller has left.
		return rueidis.NewErrorResult(err)
	}
	cmd, err := a.script("", fb.script.Source(), fb.keys[:fb.nkeys], fb.argv[:fb.nargv])
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	return a.send(ctx, cmd)
}

// wait returns m's reply, waiting at most timeout and until its context
// ends. A member given up on is not reused (its batch still answers into
// it).
func (a *adapter) wait(m *member, timeout time.Duration) rueidis.RedisResult {
	ctx := m.ctx
	select {
	case r := <-m.done:
		m.put()
		return r
	default:
	}
	var expired <-chan time.Time
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
		// The timeout comes before the context's end (the fan-out's
		// timeouts are the time left to it): a timer of its own.
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case r := <-m.done:
		m.put()
		return r
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	case <-expired:
		return rueidis.NewErrorResult(context.DeadlineExceeded)
	}
}

// build makes the command cmd args as Do would send it: a lock's SET NX
// PX [GET] and scripts (EVALSHA, EVAL) through rueidis's typed builders,
// anything else through the generic one. For the EVALSHA of a script
// NewScript made it fills fb, the script's EVAL.
func (a *adapter) build(cmd string, args []any, fb *scriptFallback) (rueidis.Completed, error) {
	switch {
	case strings.EqualFold(cmd, "SET"):
		if key, value, ms, get, ok := setNXPX(args); ok {
			if get {
				return a.setGet(key, value, ms), nil
			}
			return a.c.B().Set().Key(key).Value(value).Nx().PxMilliseconds(ms).Build(), nil
		}
	case strings.EqualFold(cmd, "EVALSHA"), strings.EqualFold(cmd, "EVAL"):
		if len(args) >= 2 {
			script, ok1 := args[0].(string)
			n, ok2 := args[1].(int)
			if ok1 && ok2 && n >= 0 && 2+n <= len(args) {
				var kbuf, abuf [4]string
				keys := appendStrs(kbuf[:0], args[2:2+n])
				argv := appendStrs(abuf[:0], args[2+n:])
				if strings.EqualFold(cmd, "EVAL") {
					return a.script("", script, keys, argv)
				}
				if s := redisclient.ScriptBySHA(script); s != nil && len(keys) <= len(fb.keys) && len(argv) <= len(fb.argv) {
					fb.script = s
					fb.nkeys, fb.nargv = copy(fb.keys[:], keys), copy(fb.argv[:], argv)
				}
				return a.script(script, "", keys, argv)
			}
		}
	}
	all := make([]any, 0, 1+len(args))
	all = append(append(all, cmd), args...)
	return a.arbitrary(all), nil
}

// setNXPX reports whether args are key value NX PX ms [GET], with string
// key and value and an int64 ms, and returns those.
func setNXPX(args []any) (key, value string, ms int64, get, ok bool) {
	if len(args) != 5 && len(args) != 6 {
		return "", "", 0, false, false
	}
	for _, w := range [...]struct {
		i    int
		word string
	}{{2, "NX"}, {3, "PX"}} {
		if s, isStr := args[w.i].(string); !isStr || !strings.EqualFold(s, w.word) {
			return "", "", 0, false, false
		}
	}
	if len(args) == 6 {
		if s, isStr := args[5].(string); !isStr || !strings.EqualFold(s, "GET") {
			return "", "", 0, false, false
		}
	}
	key, ok1 := args[0].(string)
	value, ok2 := args[1].(string)
	ms, ok3 := args[4].(int64)
	return key, value, ms, len(args) == 6, ok1 && ok2 && ok3
}
