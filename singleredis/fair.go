package singleredis

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/redisclient"
)

// The keys of the fair wait, next to the lock key k in its hash slot (see
// FairQueueKey).
const (
	// QueueSuffix is appended to the key of the queue of waiters (a list
	// of their tokens in arrival order).
	QueueSuffix = ":fairq"
	// WaitersSuffix is appended to the key of the waiters' registrations
	// (a hash: token -> "expiry ttl channel", the expiry in the server's
	// milliseconds).
	WaitersSuffix = ":fairw"
)

// MsgWakeRefused is the message logged (once per Locker, at Warn) when a
// release with FairWait handed the key to the next waiter but Redis
// refused the PUBLISH that wakes it, as an ACL without PUBLISH on the
// wake-up channels does. The release has succeeded; the waiter takes the
// key at its next check instead, up to a TTL late.
const MsgWakeRefused = "lockswap: the release handed the key to the next waiter but Redis refused to wake it (PUBLISH denied: grant +publish on the wake-up channels, see docs/security.md); waiters take the key at their next check instead, up to a TTL late"

// FairQueueKey and FairWaitersKey return the keys of the fair wait's queue
// and registrations for the Redis key k, in k's hash slot (as FenceKey).
func FairQueueKey(k string) string { return redisclient.SlotKey(k, QueueSuffix) }

// FairWaitersKey: see FairQueueKey.
func FairWaitersKey(k string) string { return redisclient.SlotKey(k, WaitersSuffix) }

var (
	//go:embed fair_common.lua
	fairCommonLua string
	//go:embed fair_wait.lua
	fairWaitLua string
	//go:embed fair_release.lua
	fairReleaseLua string
	//go:embed fair_leave.lua
	fairLeaveLua string

	// fairWait takes the lock or registers (renews) the waiter; see
	// fair_wait.lua for its replies.
	fairWait = redisclient.NewScript(redisscript.FenceCounterLua + nextFenceLua + fairCommonLua + fairWaitLua)
	// fairRelease is compare-and-delete that hands the key to the first
	// live waiter and wakes it, in one request.
	fairRelease = redisclient.NewScript(redisscript.FenceCounterLua + nextFenceLua + fairCommonLua + fairReleaseLua)
	// fairLeave takes a waiter that gives up out of the queue, and says
	// whether it had been handed the lock.
	fairLeave = redisclient.NewScript(redisscript.FenceCounterLua + nextFenceLua + fairCommonLua + fairLeaveLua)
)

// Registration timing: the server drops a registration one TTL of its
// waiter after its last renewal (so that waiters that gave up or died stop
// holding up the queue within a TTL, issue 28), and a waiter renews it
// every renewNum/renewDen of its TTL, so that a renewal late by up to a
// quarter TTL (a loaded machine) keeps its place; a later one puts the
// waiter at the back of the queue.
const (
	renewNum, renewDen = 3, 4
	// expiryMargin is how long after the key's expiry (its PTTL) the
	// first waiter asks for it.
	expiryMargin = 2 * time.Millisecond
)

// MaxFairWaiters is how many waiters may be registered in one key's fair
// queue at once (registrations not yet taken out of Redis count too, and
// for permits the records of hand-overs, one per slot). An
// Acquire that finds the queue full is not queued: its attempt fails as
// contention (lockswap.ErrHeld), and Acquire tries again per its retry
// policy, polling like a Locker without FairWait until a place is free.
const MaxFairWaiters = 10000

// fairWaitersLimit is MaxFairWaiters (lower in tests).
var fairWaitersLimit = MaxFairWaiters

// fair is the driver of a Locker with Options.FairWait: the protocol of
// proto plus a Redis-side queue (driver.Waiter), woken through Pub/Sub.
type fair struct {
	*proto
	sub     redisclient.Subscriber
	channel string // this Locker's wake-up channel

	openMu sync.Mutex // one subscription at a time
	mu     sync.Mutex
	closed bool
	active io.Closer                 // the subscription, once open
	wakes  map[string]chan<- handoff // waiting tokens -> their wake-up

	wakeRefused atomic.Bool // a refused wake-up was logged (once per Locker)
}

// handoff is a wake-up: the lock (a permit: of slot) was handed to the
// waiter at the server time at (ms), with fence.
type handoff struct {
	fence uint64
	at    int64
	slot  int
}

func newFair(p *proto, sub redisclient.Subscriber) *fair {
	return &fair{proto: p, sub: sub, channel: p.prefix + "lockswap:fairwait:" + lockstate.NewToken(), wakes: map[string]chan<- handoff{}}
}

// keys returns the KEYS of the fair scripts for the Redis key k.
func (f *fair) keys(k string) []string {
	if f.fence {
		return []string{k, FairQueueKey(k), FairWaitersKey(k), FenceKey(k)}
	}
	return []string{k, FairQueueKey(k), FairWaitersKey(k)}
}

// subscribe opens the Locker's subscription on first use.
func (f *fair) subscribe(ctx context.Context, o *driver.Outage) error {
	f.openMu.Lock()
	defer f.openMu.Unlock()
	f.mu.Lock()
	closed, open := f.closed, f.active != nil
	f.mu.Unlock()
	if closed {
		return lockswap.ErrClosed
	}
	if open {
		return nil
	}
	rctx, cancel := requestCtx(ctx, o)
	s, err := f.sub.Subscribe(rctx, f.channel, f.deliver)
	cancel()
	if err != nil {
		return fmt.Errorf("subscribe to the wake-up channel: %w", redisclient.Classify(f.c, err))
	}
	o.Answered()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		s.Close()
		return lockswap.ErrClosed
	}
	f.active = s
	f.mu.Unlock()
	return nil
}

// deliver passes a wake-up ("token fence at", a permit's "token fence at
// slot") to its waiter, if it still waits.
func (f *fair) deliver(payload string) {
	token, rest, _ := strings.Cut(payload, " ")
	fs, rest, _ := strings.Cut(rest, " ")
	at, ss, permit := strings.Cut(rest, " ")
	fence, err1 := strconv.ParseUint(fs, 10, 64)
	ms, err2 := strconv.ParseInt(at, 10, 64)
	slot, err3 := 0, error(nil)
	if permit {
		slot, err3 = strconv.Atoi(ss)
	}
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	f.mu.Lock()
	ch := f.wakes[token]
	f.mu.Unlock()
	if ch != nil {
		select {
		case ch <- handoff{fence: fence, at: ms, slot: slot}:
		default:
		}
	}
}

// Close ends the subscription and its goroutine.
func (f *fair) Close() error {
	f.mu.Lock()
	f.closed = true
	s := f.active
	f.active = nil
	f.mu.Unlock()
	if s != nil {
		return s.Close()
	}
	return nil
}

// requestCtx bounds one request by the request timeout and what is left of
// the outage bound.
func requestCtx(ctx context.Context, o *driver.Outage) (context.Context, context.CancelFunc) {
	d := lockswap.RequestTimeout
	if left, bounded := o.Left(); bounded {
		d = min(d, max(left, time.Millisecond))
	}
	return context.WithTimeout(ctx, d)
}

// fairReply is a reply of the fair scripts (and of the hash kinds'
// acquire scripts): two to five integers (the ones missing are 0).
func fairReply(v any) (r [5]int64, ok bool) {
	a, isArr := v.([]any)
	if !isArr || len(a) < 2 {
		return r, false
	}
	for i := range min(len(a), len(r)) {
		if r[i], ok = a[i].(int64); !ok {
			return r, false
		}
	}
	return r, true
}

// grant is the Grant of a lock (a permit: of slot) that a request sent
// at sent found ours with pttl left.
func (f *fair) grant(fence int64, slot int64, sent time.Time, pttl time.Duration, ttl time.Duration) driver.Grant {
	g := driver.Grant{Deadline: sent.Add(min(pttl, ttl) - lockstate.Drift(ttl)), Slot: int(slot)}
	if f.fence {
		g.Fence = uint64(fence)
	}
	return g
}

// Wait is the fair wait (driver.Waiter): one request takes the free lock
// (a permit, for c.Permits > 0: the permit scripts, fair_permits.go)
// or registers c at the tail of the key's queue in Redis; then it waits
// for its wake-up (the release that handed it the lock publishes on the
// Locker's channel), renewing its registration every 3/4 of its TTL (the
// registration lives one TTL; the renewals also notice an outage), or
// every half of the outage bound when that is sooner.
// The first live waiter also asks again when the holder's key expires
// (its PTTL; for permits, the first live permit), so that a holder that
// died costs no more than its TTL. A
// renewal finds out whether a wake-up was lost. When ctx ends it leaves
// the queue; a lock it had been handed by then is returned, for the kit
// to give back.
func (f *fair) Wait(ctx context.Context, c *driver.Claim[ref], o *driver.Outage) (driver.Grant, error) {
	k := f.prefix + c.Key
	c.Data.set(k, c.Token)
	if err := f.subscribe(ctx, o); err != nil {
		// Not ErrHeld, also when ctx ended it: the server has not said
		// that the key is held (the kit adds ctx's error).
		return driver.Grant{}, err
	}
	wake := make(chan handoff, 1)
	f.mu.Lock()
	f.wakes[c.Token] = wake
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.wakes, c.Token)
		f.mu.Unlock()
	}()
	keys := f.keys(k)
	ttl := c.TTL
	reg := ttl
	var (
		timer      *time.Timer
		sent       time.Time // the last answered request's send time
		serverNow  int64     // and the server's clock when it ran (ms)
		registered bool
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		rctx, cancel := requestCtx(ctx, o)
		start := time.Now()
		script, args := fairWait, []any{c.Token, ttl.Milliseconds(), reg.Milliseconds(), f.channel, fairWaitersLimit, fenceCounterTTL.Milliseconds()}
		if c.Permits > 0 {
			script, args = permitFairWait, append(args, c.Permits)
		}
		v, err := f.c.Run(rctx, script, keys, args...)
		cancel()
		if err != nil {
			if redisclient.IsWrongType(err) {
				if registered {
					// The key became something else while we waited (a
					// counting semaphore's): take our registration out.
					if g, held := f.leave(ctx, keys, c, o); held {
						return g, nil
					}
				}
				return driver.Grant{}, f.wrongType(ctx, k, keys)
			}
			err = redisclient.Classify(f.c, err)
			if registered || redisclient.MaybeApplied(err) {
				// Our registration may stay: take it out, and take the
				// lock if it was handed to us meanwhile.
				if g, held := f.leave(ctx, keys, c, o); held {
					return g, nil
				}
			}
			// An outage (ErrUnavailable), also when ctx ended this
			// request: what the server said before is not news of now.
			return driver.Grant{}, err
		}
		o.Answered()
		r, ok := fairReply(v)
		if !ok {
			return driver.Grant{}, fmt.Errorf("unexpected reply %v from the fair wait script: %w", v, lockswap.ErrUnavailable)
		}
		switch {
		case r[0] == 1:
			return f.grant(r[1], r[4], start, ttl, ttl), nil
		case r[0] == 2:
			return f.grant(r[1], r[4], start, time.Duration(r[2])*time.Millisecond, ttl), nil
		case r[0] == 3:
			// The queue is full: not queued (nothing written).
			return driver.Grant{}, fmt.Errorf("%w (the fair queue holds %d waiters, the most it takes: see MaxFairWaiters)", lockswap.ErrHeld, fairWaitersLimit)
		case r[0] < 0:
			if registered {
				// Leave the queue: a release would hand the key to a
				// waiter that has gone.
				if g, held := f.leave(ctx, keys, c, o); held {
					return g, nil
				}
			}
			if c.Permits > 0 {
				if err := f.permitRefused(ctx, k, c, r[0], r[1]); err != nil {
					return driver.Grant{}, err
				}
			}
			return driver.Grant{}, fenceError(FenceKey(k), r[0])
		}
		registered, sent, serverNow = true, start, r[3]
		d := ttl * renewNum / renewDen
		if left, bounded := o.Left(); bounded {
			// Ask again while half the outage bound is left: a server
			// that stopped answering meanwhile is noticed within the
			// bound (lockswap.WithMaxOutage), whatever the TTL, and the
			// request still has time to be answered by a live one.
			d = min(d, max(left/2, time.Millisecond))
		}
		if head, pttl := r[1] == 1, r[2]; head && pttl >= 0 {
			d = min(d, time.Duration(pttl)*time.Millisecond+expiryMargin)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case h := <-wake:
			// Handed to us at server time h.at: serverNow corresponds to
			// a local time no earlier than sent.
			at := sent.Add(time.Duration(h.at-serverNow) * time.Millisecond)
			g := driver.Grant{Deadline: at.Add(ttl - lockstate.Drift(ttl)), Slot: h.slot}
			if f.fence {
				g.Fence = h.fence
			}
			return g, nil
		case <-timer.C:
		case <-ctx.Done():
			if g, held := f.leave(ctx, keys, c, o); held {
				return g, nil
			}
			return driver.Grant{}, lockswap.ErrHeld
		}
	}
}

// wrongType is the error of a wait refused with WRONGTYPE: one of its keys
// holds another Redis type. On this error path only, it asks which.
func (f *fair) wrongType(ctx context.Context, k string, keys []string) error {
	if f.fence {
		if v, err := f.c.Do(ctx, "TYPE", FenceKey(k)); err == nil {
			if typ, _ := v.(string); typ != "string" && typ != "none" {
				return fmt.Errorf("the fence counter %s holds another Redis type: %w", lockstate.QuoteKey(FenceKey(k)), lockswap.ErrInvalid)
			}
		}
	}
	for _, q := range keys[1:3] {
		if v, err := f.c.Do(ctx, "TYPE", q); err == nil {
			if typ, _ := v.(string); typ != "none" && typ != "list" && typ != "hash" {
				return fmt.Errorf("the fair wait's key %s holds a Redis %s: %w", lockstate.QuoteKey(q), typ, lockswap.ErrInvalid)
			}
		}
	}
	return f.notLock(ctx, k)
}

// leave takes c out of the queue within the grace after ctx ended, and
// reports whether the lock had been handed to it (with its Grant).
func (f *fair) leave(ctx context.Context, keys []string, c *driver.Claim[ref], o *driver.Outage) (driver.Grant, bool) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt.Grace)
	defer cancel()
	start := time.Now()
	script, args := fairLeave, []any{c.Token}
	if c.Permits > 0 {
		script, args = permitFairLeave, append(args, fenceCounterTTL.Milliseconds())
	}
	v, err := f.c.Run(lctx, script, keys, args...)
	if err != nil {
		// The registration expires on its own.
		return driver.Grant{}, false
	}
	o.Answered()
	r, ok := fairReply(v)
	if !ok || r[0] != 1 {
		return driver.Grant{}, false
	}
	return f.grant(r[1], r[4], start, time.Duration(r[2])*time.Millisecond, c.TTL), true
}

// Release is compare-and-delete that hands the key to the first live
// waiter of the queue in the same request and wakes it; a permit's frees
// its slot and hands the free slots to the first live waiters.
func (f *fair) Release(ctx context.Context, c *driver.Claim[ref]) error {
	if c.RW != lockswap.NotRW {
		return f.proto.Release(ctx, c)
	}
	k := c.Data.keys[0]
	script := fairRelease
	if c.Permits > 0 {
		script = permitFairRelease
	}
	v, err := f.c.Run(ctx, script, f.keys(k), c.Token, fenceCounterTTL.Milliseconds())
	if err != nil {
		return redisclient.ClassifyHeld(f.c, err)
	}
	r, ok := fairReply(v)
	if !ok {
		return fmt.Errorf("unexpected reply %v from the fair release script: %w", v, lockswap.ErrUnavailable)
	}
	if r[0] != 1 {
		return errNotOurs
	}
	if r[2] == 1 && f.log != nil && f.wakeRefused.CompareAndSwap(false, true) {
		// The key went to the next waiter all the same: the release
		// succeeded, and the waiter finds the key at its next check.
		f.log.Warn(MsgWakeRefused, slog.String("key", lockstate.QuoteKey(k)))
	}
	return nil
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// closeBoth closes a and b (when set) at once, waits for both, and
// returns b's error (a's when b is not set). a is the fair wait's
// subscription, b the client the Locker owns: closing the client ends a
// goodbye the subscription's connection may wait for on a server that
// does not answer (rueidis gives a dedicated connection's PING a second),
// so that Close keeps its bound (the promise matrix:
// fair_wait/paused/Close on rueidis took 1.5 s). a's error is then the
// client closing its connection under it, which is no news.
func closeBoth(a, b io.Closer) io.Closer {
	return closerFunc(func() error {
		if b == nil {
			return a.Close()
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.Close()
		}()
		err := b.Close()
		<-done
		return err
	})
}
