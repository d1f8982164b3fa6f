// Package localq queues the goroutines of one polling Locker that wait for
// the same key, so that they take it in arrival order instead of racing.
//
// A polling backend (singleredis, redlock, legacysetnx) retries a held key
// after a delay of several milliseconds, while the goroutine that just
// released the key asks again one round trip later: without a queue it wins
// almost every time (barging). With a [Queue], the Locker's Acquire calls on
// one key line up locally in arrival order and only the first of the line
// (the head) polls the backend, with the caller's retry policy. When a lock
// taken through the same Locker is released, the Locker calls
// [Queue.Released] and the head tries at once, without waiting for its
// retry delay, so a hand-over inside one process costs one round trip. A
// backend that can release and make the head's attempt in one request
// (singleredis, redlock) calls [Queue.Claim] instead and delivers the
// head's result ([Queue.AcquireOffer]): the hand-over then costs no request
// of the head's own.
//
// The queue is local: it orders the goroutines of one Locker and nothing
// else. Other processes (and other Lockers in this one) still poll and can
// take the key between two local holders; fairness across processes needs a
// server-side queue (etcdlease).
//
// A Queue made with [NewShared] lines up waiters for shared holds (the
// permits of a counting semaphore): a waiter that took a hold does not
// exclude the next one, which tries at once instead of after its retry
// delay; a release still wakes the head.
//
// No goroutine is started: each waiter waits in its caller's goroutine. The
// line of a key is deleted when its last waiter leaves.
package localq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// Queue is the per-key FIFO of one Locker's waiting Acquire calls. Make it
// with [New]; it is safe for concurrent use.
type Queue struct {
	backend string
	shared  bool // NewShared: a hold taken does not exclude the next waiter

	mu     sync.Mutex
	lines  map[string]*line
	closed bool
}

// line is the FIFO of one key. It exists only while it has waiters.
type line struct {
	first, last *waiter
	n           int
	// holder is the lock the previous head took while others were waiting
	// behind it, until it is released (or the line ends): the head waits
	// no longer than its Deadline before trying again.
	holder lockswap.Lock
	// failed is the error of the line's last attempt when it failed for a
	// reason other than contention (an outage, say), until an attempt
	// succeeds: it is the cause of the wait of a waiter that never got to
	// attempt, which would otherwise read as contention.
	failed error
}

// waiter is one Acquire call in a line. Its fields other than sig and timer
// are guarded by Queue.mu.
type waiter struct {
	prev, next *waiter
	head       bool // first of its line: the only one that polls
	kick       bool // try now, without a retry delay
	// ttl is the TTL AcquireOffer was given: a releasing holder can make
	// an attempt for this TTL on the waiter's behalf (0: it cannot).
	ttl time.Duration
	// deadline is the waiter's context's deadline (zero: none); a
	// releaser whose request could outlast it by more than the grace does
	// not claim the waiter (see ClaimBy).
	deadline time.Time
	// busy: the waiter is attempting, handling a result or leaving; it
	// cannot be claimed.
	busy bool
	// claimed: a releasing holder is making an attempt on this waiter's
	// behalf (Claim); delivered: its result (got, gotErr) is in.
	claimed, delivered bool
	got                lockswap.Lock
	gotErr             error
	sig                chan struct{}
	timer              *time.Timer
}

var waiterPool = sync.Pool{New: func() any { return &waiter{sig: make(chan struct{}, 1)} }}

var linePool = sync.Pool{New: func() any { return new(line) }}

// New returns an empty Queue. backend names the Locker's backend in error
// messages ("singleredis").
func New(backend string) *Queue {
	return &Queue{backend: backend, lines: make(map[string]*line)}
}

// NewShared returns an empty Queue for shared holds, such as the permits
// of a counting semaphore: when the head takes a hold, the next waiter
// becomes head and tries at once (the key may have room for it), where a
// Queue from [New] has it wait as after a failed attempt.
func NewShared(backend string) *Queue {
	q := New(backend)
	q.shared = true
	return q
}

// Acquire waits in key's line and, as its head, calls try (one attempt at
// the backend) until it returns a lock, fails with an error that is neither
// [lockswap.ErrHeld] nor [lockswap.ErrUnavailable], the strategy gives up,
// ctx ends, or the Queue is closed. It keeps the semantics of
// [lockswap.Retry]:
//
//   - the first attempt is made at once when nobody of this Queue waits for
//     key; otherwise the caller joins the back of the line and attempts only
//     once it is the head;
//   - after a failed attempt the head waits strategy.NextDelay(attempt), or
//     less when [Queue.Released] is called for key (then it tries at once)
//     or when the lock the previous head took reaches its Deadline;
//   - a head that got the lock, gave up or was cancelled leaves the line and
//     the next waiter becomes head: after a give-up or cancellation it tries
//     at once, after a success it waits as after a failed attempt (the key
//     was just taken), except in a shared Queue ([NewShared]), where it
//     tries at once;
//   - when ctx ends the wait, the error matches ctx.Err() and the last
//     attempt's cause; a caller that ended before its first attempt gets
//     an error matching [lockswap.ErrHeld] (it waited behind holders of
//     this Queue) and ctx.Err().
//
// A strategy that gives up after the first failed attempt (NextDelay(1)
// reports false, [lockswap.NoRetry]) makes Acquire one attempt, like
// TryAcquire: it does not queue, since it would not wait.
func (q *Queue) Acquire(ctx context.Context, key string, strategy lockswap.RetryStrategy, try func(context.Context) (lockswap.Lock, error)) (lockswap.Lock, error) {
	return q.AcquireOffer(ctx, key, strategy, Offer{}, try)
}

// Offer is what a waiter of [Queue.AcquireOffer] offers a holder that
// releases the same key through the same Locker: to make the waiter's next
// attempt itself, in the request that releases its own lock.
type Offer struct {
	// TTL (positive) is the TTL an attempt made for the waiter asks for;
	// zero: the waiter cannot be claimed ([Queue.ClaimBy] wakes it
	// instead).
	TTL time.Duration
	// GiveBack gives back a lock delivered to a waiter that no longer
	// waits (its context ended, or the Queue closed, while the attempt
	// made for it was in flight): nobody will hold that lock, so it must
	// be released even while the Locker closes, when the lock's own
	// Release refuses. Nil means the lock's Release.
	GiveBack func(ctx context.Context, l lockswap.Lock)
	// Delivered, when set, is called in the waiter's goroutine for each
	// result of an attempt a releasing holder made for it, as the waiter
	// receives it (before AcquireOffer returns): the kit counts the
	// attempts of a call with it (driver.CountAttempts). Nil: nothing.
	Delivered func()
}

// AcquireOffer is Acquire for a backend that can hand a lock over: while
// the caller waits at the head of the line between attempts, a holder that
// releases key through the same Locker may [Queue.Claim] it and make the
// caller's next attempt itself, in the request that releases its own lock,
// for offer.TTL. The result counts as the caller's attempt, with the same
// rules as one made by try.
// A caller whose context ends, or whose Queue closes, while a claimed
// attempt is in flight waits for it (it is bounded by the releaser's
// request) and gives a lock it brought back with offer.GiveBack.
func (q *Queue) AcquireOffer(ctx context.Context, key string, strategy lockswap.RetryStrategy, offer Offer, try func(context.Context) (lockswap.Lock, error)) (lockswap.Lock, error) {
	if strategy == nil {
		strategy = lockswap.NoRetry()
	}
	if _, ok := strategy.NextDelay(1); !ok {
		return acquire.Retry(ctx, strategy, try)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: acquire %s: %w", q.backend, lockstate.QuoteKey(key), acquire.NotAttempted(err))
	}
	deadline, _ := ctx.Deadline()
	w, err := q.join(key, offer.TTL, deadline)
	if err != nil {
		return nil, err
	}
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
		waiterPool.Put(w)
	}()

	var (
		prev    error // the last failed attempt's error
		attempt int
		timerC  <-chan time.Time // armed: the head's wait before its next attempt
		due     bool             // that wait is over
	)
	arm := func(d time.Duration, until time.Time) {
		if !until.IsZero() {
			if u := time.Until(until); u > 0 && u < d {
				d = u
			}
		}
		if w.timer == nil {
			w.timer = time.NewTimer(d)
		} else {
			w.timer.Reset(d)
		}
		timerC = w.timer.C
	}
	// waitedCause is why the wait did not end with the lock; call it
	// before leaving the line, whose failure it reads.
	waitedCause := func() error {
		if prev != nil {
			return prev
		}
		q.mu.Lock()
		var failed error
		if l := q.lines[key]; l != nil {
			failed = l.failed
		}
		q.mu.Unlock()
		if failed != nil {
			return fmt.Errorf("waiting behind other callers of this Locker, whose last attempt failed: %w", failed)
		}
		return fmt.Errorf("%s: acquire %s: waiting behind other callers of this Locker: %w", q.backend, lockstate.QuoteKey(key), lockswap.ErrHeld)
	}
	for {
		q.mu.Lock()
		if w.claimed && !w.delivered {
			// A releaser is making our attempt: wait for its result,
			// whatever else happens (it is bounded by its request).
			q.mu.Unlock()
			<-w.sig
			continue
		}
		closed, head, kick := q.closed, w.head, w.kick
		delivered, got, gotErr := w.delivered, w.got, w.gotErr
		w.kick, w.claimed, w.delivered, w.got, w.gotErr = false, false, false, nil, nil
		var until time.Time
		if head && !kick && !due && timerC == nil {
			if l := q.lines[key]; l != nil && l.holder != nil {
				until = l.holder.Deadline()
			}
		}
		// Until it waits again the waiter is busy: nobody may claim it.
		w.busy = true
		q.mu.Unlock()

		var (
			l     lockswap.Lock
			err   error
			tried = true
		)
		switch {
		case delivered: // the attempt a releaser made for us
			attempt++
			if offer.Delivered != nil {
				offer.Delivered()
			}
			l, err = got, gotErr
		case closed:
			q.leave(key, w, nil)
			return nil, fmt.Errorf("%s: acquire %s: %w", q.backend, lockstate.QuoteKey(key), lockswap.ErrClosed)
		case head && (kick || due):
			due, timerC = false, nil
			if w.timer != nil {
				w.timer.Stop()
			}
			attempt++
			l, err = try(ctx)
		default:
			tried = false
		}
		if tried {
			q.noteAttempt(key, err)
			if err == nil {
				if !delivered || (!closed && ctx.Err() == nil) {
					q.leave(key, w, l)
					return l, nil
				}
				// Handed over to a caller that no longer waits: give it
				// back at once, also when Close is what ended the wait
				// (the lock's Release would refuse then).
				if offer.GiveBack != nil {
					offer.GiveBack(ctx, l)
				} else {
					_ = l.Release(ctx)
				}
			}
			if closed {
				q.leave(key, w, nil)
				return nil, fmt.Errorf("%s: acquire %s: %w", q.backend, lockstate.QuoteKey(key), lockswap.ErrClosed)
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				cause := err
				if prev != nil || cause == nil {
					cause = waitedCause()
				}
				q.leave(key, w, nil)
				return nil, acquire.WaitError(cause, ctxErr)
			}
			if !acquire.Retryable(err) {
				q.leave(key, w, nil)
				return nil, err
			}
			prev = err
			d, ok := strategy.NextDelay(attempt)
			if !ok {
				q.leave(key, w, nil)
				return nil, err
			}
			q.mu.Lock()
			if l := q.lines[key]; l != nil && l.holder != nil {
				until = l.holder.Deadline()
			}
			q.mu.Unlock()
			arm(d, until)
		} else if head && !due && timerC == nil {
			// Head after the previous head took the key: it is held, so
			// wait as after a failed attempt (or until it is released).
			d, ok := strategy.NextDelay(max(attempt, 1))
			if !ok {
				due = true
				continue
			}
			arm(d, until)
		}
		q.mu.Lock()
		w.busy = false
		q.mu.Unlock()
		select {
		case <-w.sig:
		case <-timerC:
			due, timerC = true, nil
		case <-ctx.Done():
			q.mu.Lock()
			if w.claimed {
				q.mu.Unlock()
				continue // the claimed attempt's result comes first
			}
			w.busy = true
			q.mu.Unlock()
			cause := waitedCause()
			q.leave(key, w, nil)
			return nil, acquire.WaitError(cause, ctx.Err())
		}
	}
}

// noteAttempt records the outcome of an attempt of key's line: an outage
// is the line's failure until the backend answers an attempt (with the
// lock or with contention).
func (q *Queue) noteAttempt(key string, err error) {
	q.mu.Lock()
	if l := q.lines[key]; l != nil {
		switch {
		case errors.Is(err, lockswap.ErrUnavailable):
			l.failed = err
		case err == nil || errors.Is(err, lockswap.ErrHeld):
			l.failed = nil // the backend answered
		}
		// Other errors (a caller's own context or TTL) are that caller's,
		// not the line's.
	}
	q.mu.Unlock()
}

// join appends a waiter for key; the first of a line is head and tries at
// once.
func (q *Queue) join(key string, ttl time.Duration, deadline time.Time) (*waiter, error) {
	w := waiterPool.Get().(*waiter)
	w.prev, w.next, w.head, w.kick = nil, nil, false, false
	w.ttl, w.busy, w.claimed, w.delivered, w.got, w.gotErr = ttl, false, false, false, nil, nil
	w.deadline = deadline // before w is in a line, where ClaimBy reads it
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		waiterPool.Put(w)
		return nil, fmt.Errorf("%s: acquire %s: %w", q.backend, lockstate.QuoteKey(key), lockswap.ErrClosed)
	}
	l := q.lines[key]
	if l == nil {
		l = linePool.Get().(*line)
		q.lines[key] = l
	}
	if l.last == nil {
		l.first, l.last = w, w
		w.head, w.kick = true, true
	} else {
		w.prev = l.last
		l.last.next = w
		l.last = w
	}
	l.n++
	return w, nil
}

// leave removes w from key's line. got is the lock w took, or nil. When w
// was the head, the next waiter becomes head: it tries at once unless w took
// the lock and the Queue is not shared. The line is deleted when empty.
// w's signal channel is drained: nothing signals a waiter that left.
func (q *Queue) leave(key string, w *waiter, got lockswap.Lock) {
	q.mu.Lock()
	l := q.lines[key]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.first = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.last = w.prev
	}
	l.n--
	if w.head {
		if got != nil {
			l.holder = got
		}
		if nx := l.first; nx != nil {
			nx.head, nx.kick = true, got == nil || q.shared
			signal(nx)
		}
	}
	if l.n == 0 {
		delete(q.lines, key)
		*l = line{}
		linePool.Put(l)
	}
	q.mu.Unlock()
	w.prev, w.next, w.head, w.kick = nil, nil, false, false
	w.ttl, w.got, w.gotErr = 0, nil, nil
	select {
	case <-w.sig:
	default:
	}
}

func signal(w *waiter) {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// Released tells the queue that a lock on key taken through this Locker
// was released or lost: the head of key's line, if any, tries at once.
// It costs nothing else when nobody waits for key.
func (q *Queue) Released(key string, l lockswap.Lock) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ln := q.lines[key]
	if ln == nil {
		return
	}
	if ln.holder == l {
		ln.holder = nil
	}
	if h := ln.first; h != nil {
		h.kick = true
		signal(h)
	}
}

// Ticket is a claim on the head of a line: the holder of a lock taken
// through the Locker, as it releases the lock, makes the head's next
// attempt itself (see [Queue.AcquireOffer]) and delivers the result.
type Ticket struct {
	q   *Queue
	key string
	w   *waiter
}

// Claim is called by a Locker's Release instead of [Queue.Released] when it
// can release l and make the next attempt of key's first waiter in one
// request. It returns a Ticket when that waiter is between attempts and
// gave a TTL (AcquireOffer); the caller must then call [Ticket.Deliver]
// exactly once. Otherwise it returns nil and acts as Released: the first
// waiter, if any, tries at once.
func (q *Queue) Claim(key string, l lockswap.Lock) *Ticket { return q.ClaimBy(key, l, time.Time{}) }

// ClaimBy is [Queue.Claim] for a hand-over request that may run until by
// (zero: no bound): a waiter whose own deadline would pass more than
// lockswap.DeadlineGrace before that is not claimed (it is kicked, as by
// Released), since a claimed waiter waits for the releaser's request
// whatever its context does.
func (q *Queue) ClaimBy(key string, l lockswap.Lock, by time.Time) *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	ln := q.lines[key]
	if ln == nil {
		return nil
	}
	if ln.holder == l {
		ln.holder = nil
	}
	h := ln.first
	if h == nil {
		return nil
	}
	tooLate := !by.IsZero() && !h.deadline.IsZero() && h.deadline.Add(lockswap.DeadlineGrace).Before(by)
	if q.closed || h.ttl <= 0 || !h.head || h.busy || h.claimed || tooLate {
		h.kick = true
		signal(h)
		return nil
	}
	h.claimed = true
	return &Ticket{q: q, key: key, w: h}
}

// TTL returns the TTL the claimed waiter asks for.
func (t *Ticket) TTL() time.Duration { return t.w.ttl }

// Deliver hands the claimed waiter the result of the attempt made for it:
// a lock (err nil) or the attempt's error.
func (t *Ticket) Deliver(l lockswap.Lock, err error) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	t.w.got, t.w.gotErr, t.w.delivered = l, err, true
	signal(t.w)
}

// Close ends every wait: Acquire calls waiting in a line return an error
// matching [lockswap.ErrClosed] (an attempt in flight finishes first), and
// later ones fail at once.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, l := range q.lines {
		for w := l.first; w != nil; w = w.next {
			signal(w)
		}
	}
}

// Waiting returns how many Acquire calls wait for key (the head included).
func (q *Queue) Waiting(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.lines[key]; l != nil {
		return l.n
	}
	return 0
}

// Parked returns how many Acquire calls wait for key between attempts:
// not attempting, handling a result or leaving, and not claimed. A
// releasing holder can claim the head of them (ClaimBy).
func (q *Queue) Parked(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	if l := q.lines[key]; l != nil {
		for w := l.first; w != nil; w = w.next {
			if !w.busy && !w.claimed {
				n++
			}
		}
	}
	return n
}

// Keys returns how many keys have a line (waiters).
func (q *Queue) Keys() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines)
}
