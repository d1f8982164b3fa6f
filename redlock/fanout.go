package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// opKind is the request a call sends to each instance.
type opKind uint8

const (
	opAcquire opKind = iota // SET NX PX (or the restart-safe script)
	opRelease               // compare-and-delete
	opExtend                // compare-and-pexpire
)

// result is one instance's answer to a call.
type result struct {
	n           int64         // 1: set / deleted / extended; 0: not
	err         error         // transport error or error reply: outcome unknown
	quarantined bool          // restarted recently: the answer is no vote
	left        time.Duration // how long the quarantine lasts
}

// call is one request fanned out to a set of instances. Calls are pooled;
// the fields other than res are set by the caller for each use.
type call struct {
	lk   *Locker
	op   opKind
	keys []string
	args []any
	ttl  time.Duration
	mask uint64 // instances to address; 0 means all
	ctx  context.Context
	res  []result
	wg   sync.WaitGroup
}

// task is one instance's part of a call, handed to a worker.
type task struct {
	c *call
	i int
}

// fanout sends a call's requests to the instances at the same time: the
// caller's goroutine serves one instance and a small fixed set of workers
// the others; a request that finds no idle worker gets a goroutine of its
// own, so a slow instance never delays the requests to the others.
type fanout struct {
	lk    *Locker
	tasks chan task
	quit  chan struct{}
	wg    sync.WaitGroup
	pool  sync.Pool
}

func newFanout(lk *Locker, workers int) *fanout {
	f := &fanout{lk: lk, tasks: make(chan task), quit: make(chan struct{})}
	n := len(lk.inst)
	f.pool.New = func() any { return &call{lk: lk, res: make([]result, n)} }
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

// close stops the workers and waits for them. Calls still in flight finish
// on goroutines of their own, bounded by the per-instance timeout.
func (f *fanout) close() {
	close(f.quit)
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
	c.keys, c.args, c.ctx = nil, nil, nil
	f.pool.Put(c)
}

// run sends c to the instances in c.mask (all when zero), each request
// bounded by deadline and ctx, and returns when every one has answered or
// failed.
func (f *fanout) run(ctx context.Context, c *call, deadline time.Time) {
	ictx, cancel := context.WithDeadline(ctx, deadline)
	c.ctx = ictx
	if c.mask == 0 {
		c.mask = 1<<len(c.res) - 1
	}
	first := -1
	for i := range c.res {
		if c.mask&(1<<i) == 0 {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		c.wg.Add(1)
		t := task{c, i}
		select {
		case f.tasks <- t:
		default:
			go func() {
				t.c.do(t.i)
				t.c.wg.Done()
			}()
		}
	}
	if first >= 0 {
		c.do(first)
	}
	c.wg.Wait()
	cancel()
}

// do sends c's request to instance i and records the answer.
func (c *call) do(i int) {
	r, in := &c.res[i], &c.lk.inst[i]
	switch c.op {
	case opAcquire:
		if c.lk.opts.RestartSafety {
			c.acquireSafe(i)
			return
		}
		ok, err := in.c.SetNXPX(c.ctx, c.keys[0], c.args[0].(string), c.ttl)
		r.err = err
		if ok && err == nil {
			r.n = 1
		}
	case opRelease, opExtend:
		s := releaseScript
		if c.op == opExtend {
			s = extendScript
		}
		v, err := in.c.Run(c.ctx, s, c.keys, c.args...)
		if err != nil {
			r.err = err
			return
		}
		r.n, _ = v.(int64)
	}
}

// acquireSafe runs the restart-safe acquire on instance i: the SET NX PX
// and the instance's epoch in one script. A new epoch (the instance lost its
// data, or is seen for the first time) younger than MaxTTL puts the
// instance in quarantine: its votes do not count until MaxTTL (plus the
// drift allowance) has passed since the epoch was created.
func (c *call) acquireSafe(i int) {
	lk := c.lk
	r, in := &c.res[i], &lk.inst[i]
	es := in.epoch.Load()
	known := ""
	if es != nil {
		known = es.value
	}
	v, err := in.c.Run(c.ctx, safeAcquire, []string{c.keys[0], EpochKey}, c.args[0], c.args[1], known)
	if err != nil {
		r.err = err
		return
	}
	now := time.Now()
	switch x := v.(type) {
	case int64:
		r.n = x
	case []any:
		set, epoch, age, err := parseEpochReply(x)
		if err != nil {
			r.err = err
			return
		}
		if set {
			r.n = 1
		}
		es = &epochState{value: epoch, until: now.Add(lk.opts.MaxTTL - age + lk.drift(lk.opts.MaxTTL))}
		in.epoch.Store(es)
	default:
		r.err = fmt.Errorf("unexpected acquire reply %T", v)
		return
	}
	if es != nil && now.Before(es.until) {
		r.quarantined, r.left = true, es.until.Sub(now)
	}
}
