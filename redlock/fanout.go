package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/redisclient"
)

// opKind is the request a call sends to each instance.
type opKind uint8

const (
	opAcquire  opKind = iota // SET NX PX GET (SET NX PX before Redis 7.0; or the restart-safe script)
	opRelease                // compare-and-delete
	opExtend                 // compare-and-pexpire
	opHandOver               // compare-and-delete, then SET NX PX for a local waiter
	opType                   // TYPE: is what holds the key a lock? (after a plain SET NX PX or the restart-safe script)
	opFence                  // Fence: the write-back of the new fence to the counter (compare-and-set)
)

// result is one instance's answer to a call.
type result struct {
	n           int64         // 1: set / deleted / extended / fence written; 0: not
	fence       int64         // Fence, opAcquire with n == 1: the counter the instance returned (as the script left it)
	applied     bool          // Fence, opAcquire with n == 1: the script set the counter to the guessed fence (the fast path)
	released    bool          // opHandOver: our key was deleted
	err         error         // transport error or error reply: outcome unknown
	quarantined bool          // restarted recently: the answer is no vote
	left        time.Duration // how long the quarantine lasts
	plain       bool          // opAcquire: sent as SET NX PX, without GET (the instance predates Redis 7.0)
	late        bool          // pipelined path: first read at the deadline, after others (timeout.go: observe)
}

// call is one request fanned out to a set of instances. Calls are pooled;
// the fields other than res are set by the caller for each use.
type call struct {
	lk     *proto
	op     opKind
	keys   []string
	key    any // keys[0], boxed once per lock (pipelined path)
	fkey   any // Fence, opAcquire: the counter's key, boxed once per lock (pipelined path)
	guess  any // Fence, opAcquire: the guessed fence (int64; 0: none), the acquire script's last argument
	args   []any
	setGet *redisclient.SetGetArgs // opAcquire: SET key token NX PX ms GET, kept in the lock (no argument list per instance)
	ttl    time.Duration
	mask   uint64 // instances to address; 0 means all
	ctx    context.Context
	res    []result
	wg     sync.WaitGroup
	conns  []redisclient.SplitConn // pipelined path: connections awaiting a reply
	sargs  []any                   // pipelined path: scratch command arguments
	epochs []*epochState           // RestartSafety: the epoch each request sent as known
	cctx   *attempt.Request        // c.ctx: the call's deadline, new for each run
	sent   time.Time               // when the run started (timeout.go: observe)
	due    time.Time               // the run's deadline
}

// task is one instance's part of a call, handed to a worker.
type task struct {
	c *call
	i int
}

// fanout sends a call's requests to the instances at the same time: the
// caller's goroutine serves one instance and workers the others. A small
// fixed set of workers lives as long as the Locker; a request that finds
// none idle starts an extra worker, which serves it and then waits up to
// extraIdle for more before it exits, up to maxExtra extra workers; past
// that a request gets a goroutine of its own. So a slow instance never
// delays the requests to the others, and under load requests run on
// goroutines whose stacks have already grown to the client's depth (a
// fresh goroutine per request spends much of its time copying its stack
// as it grows).
type fanout struct {
	lk       *proto
	rtt      []rtt // per instance: what its answers show (timeout.go)
	tasks    chan task
	quit     chan struct{}
	wg       sync.WaitGroup
	pool     sync.Pool
	maxExtra int32
	extra    atomic.Int32
	mu       sync.Mutex // orders wg.Add of extra workers before close's Wait
	closed   bool
}

// extraIdle is how long an extra worker waits for another request.
const extraIdle = time.Second

func newFanout(lk *proto, workers int) *fanout {
	n := len(lk.inst)
	f := &fanout{lk: lk, rtt: make([]rtt, n), tasks: make(chan task), quit: make(chan struct{}), maxExtra: int32(32 * n)}
	f.pool.New = func() any {
		c := &call{lk: lk, res: make([]result, n), sargs: make([]any, 0, 8), epochs: make([]*epochState, n)}
		if lk.split != nil {
			c.conns = make([]redisclient.SplitConn, n)
		}
		return c
	}
	if n > 1 {
		f.wg.Add(workers)
		for range workers {
			go f.worker()
		}
	}
	return f
}

func (f *fanout) worker() {
	defer f.wg.Done()
	for {
		select {
		case t := <-f.tasks:
			t.c.do(t.i)
			t.c.wg.Done()
		case <-f.quit:
			return
		}
	}
}

// extraWorker serves t, then further tasks until it has been idle for
// extraIdle or the fanout closes.
func (f *fanout) extraWorker(t task) {
	defer f.wg.Done()
	defer f.extra.Add(-1)
	t.c.do(t.i)
	t.c.wg.Done()
	idle := time.NewTimer(extraIdle)
	defer idle.Stop()
	for {
		select {
		case t := <-f.tasks:
			t.c.do(t.i)
			t.c.wg.Done()
			idle.Reset(extraIdle)
		case <-idle.C:
			return
		case <-f.quit:
			return
		}
	}
}

// startExtra starts an extra worker for t, and reports false when the
// fanout is closed or has as many extra workers as it may.
func (f *fanout) startExtra(t task) bool {
	if f.extra.Add(1) > f.maxExtra {
		f.extra.Add(-1)
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		f.extra.Add(-1)
		return false
	}
	f.wg.Add(1)
	go f.extraWorker(t)
	return true
}

// close stops the workers and waits for them (a worker in the middle of a
// request finishes it first, bounded by the per-instance timeout). Calls
// still in flight finish on goroutines of their own.
func (f *fanout) close() {
	f.mu.Lock()
	f.closed = true
	close(f.quit)
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fanout) get() *call {
	c := f.pool.Get().(*call)
	for i := range c.res {
		c.res[i] = result{}
	}
	c.mask = 0
	return c
}

func (f *fanout) put(c *call) {
	c.keys, c.key, c.fkey, c.guess, c.args, c.setGet, c.ctx, c.cctx = nil, nil, nil, nil, nil, nil, nil, nil
	clear(c.sargs[:cap(c.sargs)])
	clear(c.epochs)
	f.pool.Put(c)
}

// run sends c to the instances in c.mask (all when zero), each request
// bounded by deadline and ctx, and returns when every one has answered or
// failed. When every client can split send from receive (redigo), the
// requests are pipelined from the caller's goroutine (see runSplit);
// otherwise they go out on the workers.
func (f *fanout) run(ctx context.Context, c *call, deadline time.Time) {
	if c.mask == 0 {
		c.mask = 1<<len(c.res) - 1
	}
	c.sent, c.due = time.Now(), deadline
	if f.lk.split != nil {
		f.runSplit(ctx, c, deadline)
		return
	}
	c.newCtx(ctx, deadline)
	first := -1
	for i := range c.res {
		if c.mask&(1<<i) == 0 {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		f.dispatch(c, i)
	}
	if first >= 0 {
		c.do(first)
	}
	c.wg.Wait()
	c.cctx.Stop()
}

// dispatch hands instance i's request of c to an idle worker, or to a new
// extra worker, or to a goroutine of its own.
func (f *fanout) dispatch(c *call, i int) {
	c.wg.Add(1)
	t := task{c, i}
	select {
	case f.tasks <- t:
	default:
		if !f.startExtra(t) {
			go func() {
				t.c.do(t.i)
				t.c.wg.Done()
			}()
		}
	}
}

// runSplit is run when every client implements redisclient.Splitter: the
// caller's goroutine takes one connection per instance, sends the request
// to each and flushes it, then reads each reply with the time left to the
// common deadline (a read deadline on the connection: no goroutine, no
// timer per instance). A reply that does not come in time is an unknown
// outcome; its connection is closed, not pooled (redigo marks a connection
// whose read failed as broken, and its pool discards it on Close). The
// grouped rueidis adapter's split conns hold no connection: they hand the
// request to the instance's next batch and wait for its reply until the
// call's context ends.
//
// An instance that has not answered yet, or whose last request failed for
// want of a connection or an answer, is suspect: its requests go to the
// workers instead, so that dials run in parallel and one that hangs (a host
// that drops packets) cannot hold up the requests to the others, until one
// of them succeeds.
func (f *fanout) runSplit(ctx context.Context, c *call, deadline time.Time) {
	lk := f.lk
	if err := ctx.Err(); err != nil {
		for i := range c.res {
			if c.mask&(1<<i) != 0 {
				c.res[i].err = err
			}
		}
		return
	}
	// One context for the whole call: it bounds taking a connection from
	// each pool (a dial, or a wait for a free connection) and the suspect
	// instances' requests. It arms its timer only if someone waits on it.
	cc := c.newCtx(ctx, deadline)
	defer cc.Stop()
	deadline, _ = cc.Deadline()
	ictx := c.ctx
	var direct uint64
	for i := range c.res {
		if c.mask&(1<<i) != 0 && lk.inst[i].suspect.Load() {
			direct |= 1 << i
			f.dispatch(c, i)
		}
	}
	for i := range c.res {
		if c.mask&(1<<i) == 0 || direct&(1<<i) != 0 {
			continue
		}
		sc, err := lk.split[i].Split(ictx)
		if err == nil {
			if err = c.send(sc, i, false); err == nil {
				err = sc.Flush()
			}
			if err != nil {
				sc.Close()
			}
		}
		if err != nil {
			c.res[i].err = err
			lk.inst[i].suspect.Store(true)
			continue
		}
		c.conns[i] = sc
	}
	for i, sc := range c.conns {
		if sc == nil {
			continue
		}
		c.conns[i] = nil
		if !time.Now().Before(deadline) {
			c.res[i].late = true // waited on others: its round trip is unknown
		}
		v, err := sc.Receive(timeLeft(deadline))
		if c.plainSetRefused(i, err) {
			// Nothing ran: send the plain SET NX PX on the same connection.
			if err = c.send(sc, i, false); err == nil {
				err = sc.Flush()
			}
			if err == nil {
				v, err = sc.Receive(timeLeft(deadline))
			}
		}
		if err != nil && c.isScript() && isNoScript(err) {
			// The instance lost its scripts (restart, SCRIPT FLUSH): send
			// the source on the same connection.
			if err = c.send(sc, i, true); err == nil {
				err = sc.Flush()
			}
			if err == nil {
				v, err = sc.Receive(timeLeft(deadline))
			}
		}
		sc.Close()
		if err != nil && !errors.Is(err, redisclient.ErrReply) {
			lk.inst[i].suspect.Store(true)
		}
		c.record(i, v, err)
	}
	if direct != 0 {
		c.wg.Wait()
	}
}

// Boxed arguments that do not change, so that sending them allocates
// nothing.
var (
	argReleaseSHA any = releaseScript.SHA()
	argReleaseSrc any = releaseScript.Source()
	argExtendSHA  any = extendScript.SHA()
	argExtendSrc  any = extendScript.Source()
	argSafeSHA    any = safeAcquire.SHA()
	argSafeSrc    any = safeAcquire.Source()
	argHandSHA    any = handOverScript.SHA()
	argHandSrc    any = handOverScript.Source()
	argEpochKey   any = EpochKey
	argFASHA      any = fencedAcquire.SHA()
	argFASrc      any = fencedAcquire.Source()
	argFSASHA     any = fencedSafeAcquire.SHA()
	argFSASrc     any = fencedSafeAcquire.Source()
	argFWBSHA     any = fenceWriteBack.SHA()
	argFWBSrc     any = fenceWriteBack.Source()
	argFHOSHA     any = fencedHandOver.SHA()
	argFHOSrc     any = fencedHandOver.Source()
)

// isScript reports whether c's request is a script (EVALSHA).
func (c *call) isScript() bool {
	if c.op == opAcquire {
		return c.lk.opts.RestartSafety || c.lk.opts.Fence
	}
	return c.op != opType
}

// send buffers c's request on sc: the script by its source when eval, else
// by its SHA.
func (c *call) send(sc redisclient.SplitConn, i int, eval bool) error {
	a := c.sargs[:0]
	var script, src any
	switch c.op {
	case opAcquire:
		switch o := &c.lk.opts; {
		case o.Fence && o.RestartSafety:
			script, src = argFSASHA, argFSASrc
		case o.Fence:
			script, src = argFASHA, argFASrc
		case o.RestartSafety:
			script, src = argSafeSHA, argSafeSrc
		default:
			a = append(a, c.key, c.args[0], "NX", "PX", c.args[1])
			if c.res[i].plain = c.lk.inst[i].plainSet.Load(); !c.res[i].plain {
				a = append(a, "GET")
			}
			return sc.Send("SET", a...)
		}
	case opRelease:
		script, src = argReleaseSHA, argReleaseSrc
	case opExtend:
		script, src = argExtendSHA, argExtendSrc
	case opHandOver:
		script, src = argHandSHA, argHandSrc
		if c.lk.opts.Fence {
			script, src = argFHOSHA, argFHOSrc
		}
	case opFence:
		script, src = argFWBSHA, argFWBSrc
	case opType:
		a = append(a, c.key)
		return sc.Send("TYPE", a...)
	}
	cmd := "EVALSHA"
	if eval {
		cmd, script = "EVAL", src
	}
	switch o := &c.lk.opts; {
	case c.op == opAcquire && o.Fence && o.RestartSafety:
		a = append(a, script, 3, c.key, argEpochKey, c.fkey, c.args[0], c.args[1], c.knownEpoch(i), c.guess, counterTTLArg())
	case c.op == opAcquire && o.Fence:
		a = append(a, script, 2, c.key, c.fkey, c.args[0], c.args[1], c.guess, counterTTLArg())
	case c.op == opHandOver && o.Fence:
		a = append(a, script, 2, c.key, c.fkey)
		a = append(a, c.args...)
	case c.op == opAcquire: // restart-safe acquire
		a = append(a, script, 2, c.key, argEpochKey, c.args[0], c.args[1], c.knownEpoch(i))
	default:
		a = append(a, script, 1, c.key)
		a = append(a, c.args...)
	}
	return sc.Send(cmd, a...)
}

// plainSetRefused reports whether err is instance i's refusal of the
// acquire's SET NX PX GET (a Redis before 7.0, which ran nothing), and then
// switches the instance to SET NX PX for good, logging it the first time
// (redisclient.MsgSetGetFallback).
func (c *call) plainSetRefused(i int, err error) bool {
	if c.op != opAcquire || c.isScript() || c.res[i].plain || !redisclient.IsSyntaxError(err) {
		return false
	}
	if in := &c.lk.inst[i]; in.plainSet.CompareAndSwap(false, true) {
		redisclient.LogSetGetFallback(c.lk.log, in.c)
	}
	return true
}

func isNoScript(err error) bool {
	var re *redisclient.ReplyError
	return errors.As(err, &re) && strings.HasPrefix(re.Msg, "NOSCRIPT")
}

// do sends c's request to instance i through the client's own commands
// (one round trip, on the calling goroutine) and records the answer.
func (c *call) do(i int) {
	in := &c.lk.inst[i]
	var v any
	var err error
	switch c.op {
	case opAcquire:
		if c.lk.opts.Fence && c.lk.opts.RestartSafety {
			v, err = in.c.Run(c.ctx, fencedSafeAcquire, c.keys, c.args[0], c.args[1], c.knownEpoch(i), c.guess, counterTTLArg())
			break
		}
		if c.lk.opts.Fence {
			v, err = in.c.Run(c.ctx, fencedAcquire, c.keys, c.args[0], c.args[1], c.guess, counterTTLArg())
			break
		}
		if c.lk.opts.RestartSafety {
			v, err = in.c.Run(c.ctx, safeAcquire, []string{c.keys[0], EpochKey}, c.args[0], c.args[1], c.knownEpoch(i))
			break
		}
		if !in.plainSet.Load() {
			if in.sg != nil {
				var set bool
				if set, err = in.sg.SetNXPXGet(c.ctx, c.keys[0], c.args[0].(string), c.ttl); err == nil && !set {
					v = "held" // the holder's value, which the vote does not read
				}
			} else {
				v, err = in.c.Do(c.ctx, c.setGet[:]...)
			}
			if !c.plainSetRefused(i, err) {
				break
			}
		}
		c.res[i].plain = true
		var ok bool
		ok, err = in.c.SetNXPX(c.ctx, c.keys[0], c.args[0].(string), c.ttl)
		if ok {
			v = "OK"
		}
	case opType:
		v, err = in.c.Do(c.ctx, "TYPE", c.keys[0])
	case opRelease, opExtend, opHandOver, opFence:
		s := releaseScript
		switch c.op {
		case opExtend:
			s = extendScript
		case opHandOver:
			s = handOverScript
			if c.lk.opts.Fence {
				s = fencedHandOver
			}
		case opFence:
			s = fenceWriteBack
		}
		v, err = in.c.Run(c.ctx, s, c.keys, c.args...)
	}
	if err == nil || errors.Is(err, redisclient.ErrReply) {
		if in.suspect.Load() {
			in.suspect.Store(false)
		}
	} else if c.lk.split != nil {
		in.suspect.Store(true)
	}
	c.record(i, v, err)
}

// record stores instance i's reply v (or error) to c's request.
func (c *call) record(i int, v any, err error) {
	err = c.observe(i, err)
	r := &c.res[i]
	if err != nil {
		if c.op == opAcquire && !c.isScript() && redisclient.IsWrongType(err) {
			err = errKeyNotLock
		}
		r.err = err
		return
	}
	switch {
	case c.op == opAcquire && c.lk.opts.Fence && c.lk.opts.RestartSafety:
		c.fencedSafeReply(i, v)
	case c.op == opAcquire && c.lk.opts.Fence:
		c.fencedReply(i, v)
	case c.op == opAcquire && c.lk.opts.RestartSafety:
		c.safeReply(i, v)
	case c.op == opAcquire && r.plain:
		if v != nil { // OK
			r.n = 1
		}
	case c.op == opAcquire:
		if v == nil { // SET NX GET: no previous value, so it was set
			r.n = 1
		}
	case c.op == opType:
		switch typ, _ := v.(string); typ {
		case "string", "none", "":
		default:
			r.err = &notLockError{msg: fmt.Sprintf("the key holds a %s, not a lock", typ), reason: notLockReason}
		}
	case c.op == opHandOver && c.lk.opts.Fence:
		c.fencedHandOverReply(i, v)
	case c.op == opHandOver:
		a, _ := v.([]any)
		if len(a) != 2 {
			r.err = fmt.Errorf("unexpected hand-over reply %v", v)
			return
		}
		rel, _ := a[0].(int64)
		r.released = rel == 1
		r.n, _ = a[1].(int64)
	case c.op == opFence:
		if r.n, _ = v.(int64); r.n < 0 {
			r.n, r.err = 0, counterError(c.keys[0], r.n)
		}
	default:
		r.n, _ = v.(int64)
	}
}

// notLockReason says what to do about a key that holds another Redis type.
const notLockReason = "a key the lock uses holds another Redis type: it is not a lock; use another key or prefix, or delete the value"

// errKeyNotLock is an instance's refusal (WRONGTYPE) of the acquire's
// SET NX PX GET: the key holds another Redis type.
var errKeyNotLock = &notLockError{msg: "the key holds another Redis type, not a lock", reason: notLockReason}

// knownEpoch notes and returns the epoch the Locker last saw on instance
// i ("" if none), which the restart-safe acquire sends.
func (c *call) knownEpoch(i int) string {
	es := c.lk.inst[i].epoch.Load()
	c.epochs[i] = es
	if es == nil {
		return ""
	}
	return es.value
}

// safeReply records instance i's reply to the restart-safe acquire: the
// SET NX PX and the instance's epoch in one script. A new epoch (the
// instance lost its data, or is seen for the first time) younger than
// MaxTTL puts the instance in quarantine: its votes do not count until
// MaxTTL (plus the drift allowance) has passed since the epoch was created,
// or since now for an epoch in its server's future (quarantineLeft).
func (c *call) safeReply(i int, v any) {
	lk := c.lk
	r, in := &c.res[i], &lk.inst[i]
	es := c.epochs[i]
	now := time.Now()
	switch x := v.(type) {
	case int64:
		r.n = x
	case []any:
		set, epoch, age, err := parseEpochReply(x)
		if err != nil {
			r.err = err
			if set { // undone like any SET of a failed attempt
				r.n = 1
			}
			return
		}
		if set {
			r.n = 1
		}
		es = &epochState{value: epoch, until: now.Add(lk.quarantineLeft(age)), ahead: max(-age, 0)}
		in.epoch.Store(es)
	default:
		r.err = fmt.Errorf("unexpected acquire reply %T", v)
		return
	}
	if es != nil && now.Before(es.until) {
		r.quarantined, r.left = true, es.until.Sub(now)
	}
}

// newCtx gives c a new context for one run, bounded by parent and
// deadline (attempt.Until), and returns it; its Stop method finishes the
// run. Each run gets a new one, so that a client library that keeps a
// context it was handed (a connection pool watching it, a goroutine that
// reads Err after Done) never sees it come back to life for another
// request. Its Done channel and timer are made only if someone asks for
// Done (the pipelined path usually never does).
func (c *call) newCtx(parent context.Context, deadline time.Time) *attempt.Request {
	c.cctx = attempt.Until(parent, deadline)
	c.ctx = c.cctx
	return c.cctx
}
