package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/background"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// prepare is the prologue of Acquire and TryAcquire: it refuses a closed
// Locker, a bad key and bad options, changing nothing anywhere.
func (lk *Locker[D]) prepare(key string, opts []lockswap.Option) (lockswap.Options, error) {
	if lk.closed.Load() {
		return lockswap.Options{}, lk.fail("acquire", key, lockswap.ErrClosed)
	}
	if err := acquire.ValidateKey(key); err != nil {
		return lockswap.Options{}, fmt.Errorf("%s: acquire: %w", lk.cfg.Name, err)
	}
	if lk.cfg.CheckKey != nil {
		if err := lk.cfg.CheckKey(key); err != nil {
			return lockswap.Options{}, lk.fail("acquire", key, err)
		}
	}
	o, err := lockswap.Options{TTL: lk.cfg.TTL, Retry: lk.cfg.Retry}.Resolve(opts...)
	if err == nil {
		err = lk.checkTTL(o.TTL)
	}
	if err == nil && o.Permits > 0 && !lk.cfg.Permits {
		err = fmt.Errorf("WithPermits: this backend has no counting semaphores: %w", lockswap.ErrInvalid)
	}
	if err == nil && o.RW != lockswap.NotRW && !lk.cfg.ReadWrite {
		err = fmt.Errorf("With%s: this backend has no read-write locks: %w", title(o.RW), lockswap.ErrInvalid)
	}
	if err != nil {
		return o, lk.fail("acquire", key, err)
	}
	return o, nil
}

// Acquire waits for the lock per the retry policy (Config.Retry or
// lockswap.WithRetry) until ctx ends; see lockswap.Locker.
//
// With Config.Queue, the goroutines that wait for the same key through
// this Locker queue in arrival order and only the first of them asks the
// backend; when a lock taken through this Locker is released, the first
// waiter tries at once (or, with a [HandOver] driver, is handed the lock
// in the releasing request). Waiters for permits line up apart from the
// key's mutex (no hand-over; the waiter behind one that took a permit
// tries at once); read-write holds poll without a line. A retry policy
// that never retries (lockswap.NoRetry) makes one attempt without
// queueing. The order is local to this Locker: other processes and
// Lockers still poll and may take the key first.
func (lk *Locker[D]) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	if err := acquire.ValidateContext(ctx); err != nil {
		return nil, lk.fail("acquire", key, err)
	}
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	n := attemptsOf(ctx) // nil: not counted
	if lk.w != nil && (o.Permits == 0 || lk.cfg.WaitPermits) && (o.RW == lockswap.NotRW || lk.cfg.WaitRW) {
		return lk.wait(ctx, key, o, n)
	}
	first := true
	outage := acquire.NewOutage(o.MaxOutage, &lk.answers)
	a := askOf(o)
	if o.RW == lockswap.WriteHold {
		a.writer.ID = lockstate.NewToken()
	}
	marked := false // an attempt of a writer found the key held, or may have: it may have marked it
	try := outage.Wrap(attempt.Timeout, func(ctx context.Context, timeout time.Duration) (lockswap.Lock, error) {
		if a.writer.ID != "" {
			a.writer.Until = writerWaits(ctx, o.TTL)
		}
		l, err := lk.try(ctx, key, a, first, n, timeout)
		first = false
		marked = marked || a.writer.ID != "" && err != nil && !errors.Is(err, lockswap.ErrInvalid)
		return l, err
	})
	retry := outage.Strategy(o.Retry)
	q := lk.queueOf(a)
	if q == nil {
		l, err := acquire.Retry(ctx, retry, try)
		if err != nil && marked {
			lk.unmark(ctx, key, a.writer)
		}
		return l, lk.name(key, err)
	}
	offer := localq.Offer{GiveBack: lk.giveBackHanded}
	if lk.ho != nil && q == lk.q {
		offer.TTL = o.TTL // a releasing holder may take the lock for us
		if n != nil {
			offer.Delivered = n.add // its attempt counts as ours
		}
	}
	l, err := q.AcquireOffer(ctx, key, retry, offer, try)
	return l, lk.name(key, err)
}

// name prefixes an error of the wait loop that names nothing (a context
// that had ended before the first attempt) with the backend and key.
func (lk *Locker[D]) name(key string, err error) error {
	if err == nil {
		return nil
	}
	return acquire.Name(err, fmt.Sprintf("%s: acquire %s", lk.cfg.Name, lockstate.QuoteKey(key)))
}

// TryAcquire makes one attempt. It does not queue behind the Locker's
// waiting Acquire calls: when the key is free it may take it before them.
func (lk *Locker[D]) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	if err := acquire.ValidateContext(ctx); err != nil {
		return nil, lk.fail("acquire", key, err)
	}
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	l, err := lk.try(ctx, key, askOf(o), true, attemptsOf(ctx), attempt.Timeout)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			// The attempt failed after its caller gave up (its grace ran
			// out): say both.
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
	}
	return l, err
}

// try makes one attempt, counted in n (nil: not counted), whose request
// takes at most timeout; a caller that gives up while the request is on
// its way gets no lock and leaves none (see internal/attempt).
func (lk *Locker[D]) try(ctx context.Context, key string, a ask, first bool, n *Attempts, timeout time.Duration) (lockswap.Lock, error) {
	l := lk.newLock(key, a, first)
	n.add()
	// Close ends the request at once: a waiter whose attempt hangs on a
	// server that does not answer gets ErrClosed then, not at the
	// request's deadline.
	start := time.Now()
	rctx := attempt.OnceAt(&l.acqReq, ctx, start, timeout).EndAtClose(lk.deadlines)
	g, err := lk.d.Acquire(rctx, &l.c)
	rctx.Stop()
	if err != nil {
		if lk.cfg.Undo != nil && lk.cfg.Undo(err) {
			lk.undo(ctx, l.c)
		}
		if lk.closed.Load() && !errors.Is(err, lockswap.ErrClosed) {
			// Close ran meanwhile, and may be what ended the request.
			err = closedBy(err)
		}
		return nil, lk.fail("acquire", key, err)
	}
	l.granted(start, g)
	if ctx.Err() != nil {
		lk.giveBack(ctx, l)
		return nil, lk.fail("acquire", key, givenUp(ctx.Err()))
	}
	if lk.closed.Load() {
		// Close ran meanwhile: nobody could release or extend the lock.
		lk.giveBack(ctx, l)
		return nil, lk.fail("acquire", key, fmt.Errorf("acquired as the Locker was closed; giving it back: %w", lockswap.ErrClosed))
	}
	if err := l.expired(ctx, start); err != nil {
		return nil, lk.fail("acquire", key, err)
	}
	return l, nil
}

// wait is Acquire through a Waiter: one Wait after another while the
// failures are outages and the retry policy and the outage bound allow,
// under ctx also cancelled by Close. A lock taken after the caller gave up
// is given back. Each Wait is an attempt, counted in count (nil: not
// counted).
func (lk *Locker[D]) wait(ctx context.Context, key string, o lockswap.Options, count *Attempts) (lockswap.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, lk.fail("acquire", key, acquire.NotAttempted(err))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(lk.stop, cancel)()
	ob := newOutage(o.MaxOutage)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var prev error
	for n := 1; ; n++ {
		l := lk.newLock(key, askOf(o), n == 1)
		start := time.Now()
		count.add()
		answered := ob.last()
		g, err := lk.w.Wait(wctx, &l.c, ob)
		if err == nil {
			l.granted(start, g)
			if lk.closed.Load() {
				lk.giveBack(ctx, l)
				return nil, lk.fail("acquire", key, fmt.Errorf("acquired as the Locker was closed; giving it back: %w", lockswap.ErrClosed))
			}
			if ctx.Err() != nil {
				lk.giveBack(ctx, l)
				return nil, lk.fail("acquire", key, givenUp(ctx.Err()))
			}
			if err = l.expired(ctx, start); err == nil {
				return l, nil
			}
			// Too slow to leave any validity: a failed attempt, as an
			// outage, and the wait goes on. The grant it got is no answer
			// for the outage bound.
			ob.setLast(answered)
		}
		if lk.closed.Load() && !errors.Is(err, lockswap.ErrClosed) {
			err = closedBy(err)
		}
		if errors.Is(err, lockswap.ErrClosed) {
			return nil, lk.fail("acquire", key, err)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The context ended the wait: the cause is what the wait was
			// for (the holder, ErrHeld) or the attempt before, if this one
			// failed because of the context.
			cause := err
			if !errors.Is(err, lockswap.ErrHeld) && prev != nil {
				cause = prev
			}
			return nil, lk.fail("acquire", key, acquire.WaitError(cause, ctxErr))
		}
		if !errors.Is(err, lockswap.ErrHeld) && !errors.Is(err, lockswap.ErrUnavailable) {
			return nil, lk.fail("acquire", key, err)
		}
		if errors.Is(err, lockswap.ErrUnavailable) && ob.Over() {
			return nil, lk.fail("acquire", key, fmt.Errorf("no answer for %v (see lockswap.WithMaxOutage): %w", ob.limit, err))
		}
		prev = err
		delay, ok := o.Retry.NextDelay(n)
		if !ok {
			return nil, lk.fail("acquire", key, err)
		}
		if left, bounded := ob.Left(); bounded {
			delay = min(delay, max(left, 0))
		}
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
		select {
		case <-wctx.Done():
			if lk.closed.Load() {
				return nil, lk.fail("acquire", key, closedBy(err))
			}
			return nil, lk.fail("acquire", key, acquire.WaitError(err, ctx.Err()))
		case <-timer.C:
		}
	}
}

// undo releases c in the background: a request whose outcome is unknown
// may have taken it. It is done when the release removed the lock, when
// the backend gave another answer than "not ours", or when two "not
// ours" answered one after the other: the lost request may still be
// waiting on the server on its abandoned connection and run after a
// request sent later on another, but a server that reads every connection
// with data before it answers (Redis does) has run it by the second answer.
func (lk *Locker[D]) undo(ctx context.Context, c Claim[D]) {
	work := func(ctx context.Context) {
		answers := 0
		var last error
		background.Retry(ctx, func(ctx context.Context) bool {
			err := lk.d.Release(ctx, &c)
			last = err
			if lk.uncertain(err) {
				return false
			}
			answers++
			return err == nil || !errors.Is(err, lockswap.ErrLost) || answers >= 2
		})
		if answers == 0 && last != nil && lk.log.on() {
			lk.log.warn(MsgUndoGaveUp, c.Key, errAttr(last), slog.Duration("ttl", c.TTL))
		}
	}
	if !lk.bg.Go(ctx, work) {
		// The Locker is closing: one try within the grace.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt.Grace)
		work(rctx)
		cancel()
	}
}

// unmark removes writer w's mark on key in the background when the driver
// can (Unmarker): the Acquire it stood for gave up.
func (lk *Locker[D]) unmark(ctx context.Context, key string, w WriterWait) {
	if lk.um == nil {
		return
	}
	lk.bg.Go(ctx, func(ctx context.Context) { _ = lk.um.Unmark(ctx, key, w) })
}

// ask is what an attempt asks for besides the key: the fields of its
// Claim.
type ask struct {
	ttl     time.Duration
	permits int
	rw      lockswap.RWMode
	writer  WriterWait
}

// askOf returns what an attempt with options o asks for; the caller sets
// writer for the attempts of an Acquire of a write hold.
func askOf(o lockswap.Options) ask { return ask{ttl: o.TTL, permits: o.Permits, rw: o.RW} }

// writerWaits returns until when a writer's attempt under ctx marks its
// key (WriterWait.Until): ctx's deadline, at most ttl from now.
func writerWaits(ctx context.Context, ttl time.Duration) time.Time {
	until := time.Now().Add(ttl)
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		return d
	}
	return until
}

// title returns "Read" or "Write", for the name of m's option.
func title(m lockswap.RWMode) string {
	if m == lockswap.ReadHold {
		return "Read"
	}
	return "Write"
}
