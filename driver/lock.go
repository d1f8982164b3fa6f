package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// lock is a held lock: the kit's bookkeeping around the driver's Claim.
type lock[D any] struct {
	lockstate.State
	lk       *Locker[D]
	c        Claim[D] // c.TTL and c.Data change only inside the gate
	released atomic.Bool
	flags    atomic.Uint32 // flagLost (see Claim.Lose), flagHeld, flagReported
	gate     gate          // one Extend or Release at a time
	// The request contexts of the acquire and of the release, kept here
	// to spare an allocation each (attempt.Once).
	acqReq, relReq attempt.Request
	slot           int // a permit's slot (Grant.Slot), set once at the grant
}

// Slot returns the slot of a permit (lockswap.Slot), and false for a
// mutex's lock.
func (l *lock[D]) Slot() (int, bool) { return l.slot, l.c.Permits > 0 }

// RWMode returns the hold of a read-write lock l is (lockswap.ModeOf),
// lockswap.NotRW for a mutex's lock or a permit.
func (l *lock[D]) RWMode() lockswap.RWMode { return l.c.RW }

// Deadline is the kit's deadline, or the driver's Bound when earlier.
func (l *lock[D]) Deadline() time.Time {
	d := l.State.Deadline()
	if l.lk.bd != nil {
		if b := l.lk.bd.Bound(&l.c); !b.IsZero() && b.Before(d) {
			return b
		}
	}
	return d
}

// newLock returns the lock of one attempt, before the driver's request:
// its State is already usable (with a provisional deadline, the TTL from
// now), so that the driver may call Claim.Lose and Claim.Done from then on.
func (lk *Locker[D]) newLock(key string, a ask, first bool) *lock[D] {
	l := &lock[D]{lk: lk}
	l.c = Claim[D]{Key: key, Token: lockstate.NewToken(), TTL: a.ttl, Permits: a.permits, RW: a.rw,
		Writer: a.writer, First: first, l: l}
	// Until it is granted the lock has no time limit of its own: a Wait
	// may last longer than the TTL, which counts from the grant.
	l.Init(key, l.c.Token, 0, false, notYetGranted)
	return l
}

// notYetGranted is the provisional deadline of a lock whose attempt is
// still under way: a hundred years after the process started, later than
// any wait ends. One reading of the clock for the process, not one per
// attempt; it carries a monotonic reading, so the lock's comparisons with
// it read the monotonic clock alone.
var notYetGranted = time.Now().Add(100 * 365 * 24 * time.Hour)

// granted sets up l, whose attempt started at start, as held. A lock the
// driver already lost (Claim.Lose) stays ended.
func (l *lock[D]) granted(start time.Time, g Grant) {
	l.SetTTL(l.c.TTL)
	l.SetFence(g.Fence, l.lk.cfg.Fence)
	l.slot = g.Slot
	l.SetDeadline(deadline(start, l.c.TTL, g))
	if l.flags.Or(flagHeld)&flagLost != 0 {
		l.reportLost(ReasonDriverLost)
	}
}

// givenUp is the error of an attempt that took the lock after its caller
// had given up (ctxErr): the lock is given back, and like an attempt too
// slow for its TTL it is a failed attempt, which matches
// lockswap.ErrUnavailable as well as ctxErr.
func givenUp(ctxErr error) error {
	return fmt.Errorf("acquired as the wait was given up; giving it back: %w (%w)", ctxErr, lockswap.ErrUnavailable)
}

// expired gives l back and returns an error matching
// lockswap.ErrUnavailable when l, granted for an attempt that started at
// start, has no validity left: the attempt took as long as the TTL
// allowed. A lock is never returned already past its Deadline. A slow
// attempt is a failed attempt (a slow server, a busy machine, a process
// starved of CPU), not bad input: Acquire tries again, and the time counts
// toward its outage bound (lockswap.WithMaxOutage).
func (l *lock[D]) expired(ctx context.Context, start time.Time) error {
	if time.Until(l.Deadline()) > 0 {
		return nil
	}
	now := time.Now()
	l.lk.giveBack(ctx, l)
	return fmt.Errorf("the attempt took %v, which left the ttl %v no validity (a slow server or a busy machine); the lock was given back: %w",
		now.Sub(start).Round(time.Microsecond), l.c.TTL, lockswap.ErrUnavailable)
}

// giveBack releases l, a lock nobody will hold, in the background (inline
// within the grace when the Locker is closing: a lock taken while Close
// runs is given back too).
func (lk *Locker[D]) giveBack(ctx context.Context, l *lock[D]) {
	release := func(ctx context.Context) { _ = l.release(ctx, true) }
	if !lk.bg.Go(ctx, release) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt.Grace)
		release(rctx)
		cancel()
	}
}

func deadline(start time.Time, ttl time.Duration, g Grant) time.Time {
	if !g.Deadline.IsZero() {
		return g.Deadline
	}
	return start.Add(ttl - lockstate.Drift(ttl))
}

// Extend asks the driver for ttl more validity; see lockswap.Lock.
func (l *lock[D]) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return errNilLock("extend")
	}
	lk, key := l.lk, l.c.Key
	if err := acquire.ValidateContext(ctx); err != nil {
		return lk.fail("extend", key, err)
	}
	if err := lk.checkTTL(ttl); err != nil {
		return lk.fail("extend", key, err)
	}
	if lk.closed.Load() {
		return lk.fail("extend", key, lockswap.ErrClosed)
	}
	if l.Ended() {
		l.End()
		l.reportExpired()
		return lk.fail("extend", key, fmt.Errorf("validity already over: %w", lockswap.ErrLost))
	}
	// The call's bound is fixed now: waiting for its turn does not extend it.
	limit := attempt.Limit(ctx, attempt.Timeout)
	if !l.gate.enter(ctx, limit) {
		return lk.fail("extend", key, fmt.Errorf("another Extend or Release of this lock was still running at the deadline: %w", lockswap.ErrUnavailable))
	}
	defer l.gate.leave()
	if l.released.Load() || l.Ended() {
		l.End()
		l.reportExpired()
		return lk.fail("extend", key, fmt.Errorf("validity already over: %w", lockswap.ErrLost))
	}
	start := time.Now()
	rctx := attempt.New(ctx, time.Until(limit))
	g, err := lk.d.Extend(rctx, &l.c, ttl)
	rctx.Stop()
	if err != nil {
		if errors.Is(err, lockswap.ErrLost) {
			l.End()
			if lk.log.on() {
				l.reportLost(ReasonExtendRefused, errAttr(err))
			}
		}
		return lk.fail("extend", key, err)
	}
	l.c.TTL = ttl
	l.SetTTL(ttl)
	if !l.SetDeadline(deadline(start, ttl, g)) {
		return lk.fail("extend", key, fmt.Errorf("lock ended while extending: %w", lockswap.ErrLost))
	}
	return nil
}

// Release gives the lock up; see lockswap.Lock.
func (l *lock[D]) Release(ctx context.Context) error {
	if l == nil {
		return errNilLock("release")
	}
	if err := acquire.ValidateContext(ctx); err != nil {
		return l.lk.fail("release", l.c.Key, err) // nothing released: call again with a context
	}
	return l.release(ctx, false)
}

// closedBy is the error of a call that Close ended, err being what the
// call met meanwhile: it matches lockswap.ErrClosed alone (every error
// matches exactly one sentinel), and tells err in its message.
func closedBy(err error) error {
	return fmt.Errorf("%w (%v)", lockswap.ErrClosed, err)
}

// errNilLock is the error of a method called on a nil lock, which names
// no backend and no key.
func errNilLock(op string) error {
	return fmt.Errorf("%s of a nil lock (a Lock from a failed Acquire?): %w", op, lockswap.ErrInvalid)
}

// release is Release; giveBack also releases after Close (a lock nobody
// was handed), and its failures are logged as such.
func (l *lock[D]) release(ctx context.Context, afterClose bool) error {
	if l.released.Load() {
		return nil
	}
	lk, key := l.lk, l.c.Key
	if lk.closed.Load() && !afterClose {
		if l.flags.Load()&flagLost != 0 {
			return lk.fail("release", key, fmt.Errorf("%w, and the lock was lost before", lockswap.ErrClosed))
		}
		return lk.fail("release", key, lockswap.ErrClosed)
	}
	// The call's bound is fixed now: waiting for its turn does not extend it.
	limit := attempt.Limit(ctx, lockswap.CleanupTimeout)
	if !l.gate.enter(ctx, limit) {
		return lk.fail("release", key, fmt.Errorf("an Extend of this lock was still running at the deadline: %w", lockswap.ErrUnavailable))
	}
	defer l.gate.leave()
	if l.released.Load() {
		return nil
	}
	if !afterClose {
		l.reportExpired()
	}
	if lk.ho != nil && lk.q != nil && l.c.Permits == 0 && l.c.RW == lockswap.NotRW {
		if t := lk.q.ClaimBy(key, l, limit); t != nil {
			return l.handOver(ctx, t, limit)
		}
	}
	// One request answers almost every release; the retries and the
	// background continuation (attempt.Release) are for the rest.
	start := time.Now()
	rctx := attempt.OnceAt(&l.relReq, ctx, start, limit.Sub(start))
	limit, _ = rctx.Deadline()
	err := lk.d.Release(rctx, &l.c)
	rctx.Stop()
	if lk.uncertain(err) {
		c := l.c // the background release keeps its own copy
		var pending bool
		_, err, pending = attempt.Release(ctx, lk.bg, start, limit, struct{}{}, err,
			func(ctx context.Context) (struct{}, error) { return struct{}{}, lk.d.Release(ctx, &c) },
			lk.uncertain, func(_ struct{}, err error) {
				if err == nil || errors.Is(err, lockswap.ErrLost) {
					l.settle(err == nil)
				} else if lk.log.on() {
					l.reportFailed(MsgReleaseGaveUp, afterClose, err)
				}
			})
		if pending {
			// The holder gave the lock up: it no longer excludes anyone
			// it can count on.
			l.End()
			return lk.fail("release", key, fmt.Errorf("outcome unknown at the deadline, still releasing in the background: %w", err))
		}
	}
	if err != nil && lk.closed.Load() && !errors.Is(err, lockswap.ErrClosed) {
		// Close ran meanwhile and may be why (etcdlease revokes its
		// leases): say both.
		err = closedBy(err)
	}
	if err != nil && !errors.Is(err, lockswap.ErrLost) && !gaveUp(err) {
		if lk.log.on() {
			l.reportFailed(MsgReleaseFailed, afterClose, err)
		}
		return lk.fail("release", key, err)
	}
	if err != nil && !gaveUp(err) && lk.log.on() && !afterClose {
		l.reportLost(ReasonNotOurs, errAttr(err))
	}
	l.settle(err == nil || gaveUp(err)) // see GaveUp
	if err != nil {
		return lk.fail("release", key, err)
	}
	return nil
}

// settle ends a lock whose release is decided: released, or lost. Our key
// is free (or was not ours): the next local waiter tries now.
func (l *lock[D]) settle(released bool) {
	if released {
		l.released.Store(true)
	}
	l.End()
	if q := l.lk.queueOf(ask{permits: l.c.Permits, rw: l.c.RW}); q != nil {
		q.Released(l.c.Key, l)
	}
}

// handOver releases l and, in the same request, makes the attempt of the
// first local waiter (claimed by t), within limit.
func (l *lock[D]) handOver(ctx context.Context, t *localq.Ticket, limit time.Time) error {
	lk, key := l.lk, l.c.Key
	next := lk.newLock(key, ask{ttl: t.TTL()}, false)
	// The claimed waiter waits for this request whatever its own context
	// does, so the request is bounded even when ctx is not.
	start := time.Now()
	hctx := attempt.OnceAt(&l.relReq, ctx, start, limit.Sub(start))
	defer hctx.Stop()
	g, acqErr, released := lk.ho.HandOver(hctx, &l.c, &next.c)
	if acqErr == nil {
		next.granted(start, g)
		if lk.closed.Load() {
			// Close ran meanwhile: the waiter gets ErrClosed, and nobody
			// would release what it was handed.
			lk.giveBack(ctx, next)
			t.Deliver(nil, lk.fail("acquire", key, lockswap.ErrClosed))
		} else if err := next.expired(ctx, start); err != nil {
			t.Deliver(nil, lk.fail("acquire", key, err))
		} else {
			t.Deliver(next, nil)
		}
	} else {
		if lk.cfg.Undo != nil && lk.cfg.Undo(acqErr) {
			lk.undo(ctx, next.c) // the waiter's attempt may have been applied
		}
		t.Deliver(nil, lk.fail("acquire", key, acqErr))
	}
	relErr := released()
	if lk.uncertain(relErr) {
		// Unknown outcome: our release may have been applied or not; it
		// is done (by token) in the background.
		lk.undo(ctx, l.c)
		l.End()
		return lk.fail("release", key, fmt.Errorf("outcome unknown, still releasing in the background: %w", relErr))
	}
	if relErr == nil || errors.Is(relErr, lockswap.ErrLost) || gaveUp(relErr) {
		l.End()
	}
	if relErr != nil && !gaveUp(relErr) && lk.log.on() {
		if errors.Is(relErr, lockswap.ErrLost) {
			l.reportLost(ReasonNotOurs, errAttr(relErr))
		} else {
			l.reportFailed(MsgReleaseFailed, false, relErr)
		}
	}
	if relErr == nil || gaveUp(relErr) {
		l.released.Store(true) // see GaveUp
	}
	if relErr != nil {
		return lk.fail("release", key, relErr)
	}
	return nil
}

// Data returns the driver's Data of l, a lock returned by a [Locker] of
// the same D: what a backend's own accessors read (legacysetnx's stored
// timestamp). ok is false for any other lock.
func Data[D any](l lockswap.Lock) (d D, ok bool) {
	kl, ok := l.(*lock[D])
	if !ok || kl == nil {
		return d, false
	}
	return kl.c.Data, true
}

// gate lets one Extend or Release of a lock run at a time; a caller waits
// for its turn no later than its own limit. It costs no allocation unless
// two calls meet.
type gate struct {
	mu   sync.Mutex
	busy bool
	wake chan struct{} // closed when the current holder leaves; made on demand
}

func (g *gate) enter(ctx context.Context, limit time.Time) bool {
	var t *time.Timer
	done := ctx.Done()
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		g.mu.Lock()
		if !g.busy {
			g.busy = true
			g.mu.Unlock()
			return true
		}
		if g.wake == nil {
			g.wake = make(chan struct{})
		}
		wake := g.wake
		g.mu.Unlock()
		left := time.Until(limit)
		if left <= 0 {
			return false
		}
		if t == nil {
			t = time.NewTimer(left)
		} else {
			t.Reset(left)
		}
		select {
		case <-wake:
		case <-t.C:
			return false
		case <-done:
			// A cancelled caller waits no more than the grace.
			done = nil
			if until := time.Now().Add(attempt.Grace); until.Before(limit) {
				limit = until
			}
		}
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	g.busy = false
	if g.wake != nil {
		close(g.wake)
		g.wake = nil
	}
	g.mu.Unlock()
}
