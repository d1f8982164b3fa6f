package attempt

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Slot is the width of the time slots of [Deadlines]: the requests that
// end within the same Slot share one Done channel, closed at the slot's
// start, so that a request ends up to Slot before its Deadline and never
// after it (as far as timers run on time).
const Slot = 16 * time.Millisecond

// MinShared is the least time a request must be begun with, to its
// deadline, for [Deadlines] to serve it: ending up to [Slot] early is
// then under 2% of that time. A request begun with less gets a channel
// and a timer of its own; a later command under a request begun with
// more shares its slot whatever it has left by then (see
// [SharedDeadline]).
const MinShared = time.Second

// slotBase is the origin of the slots: a reading of the monotonic clock
// for the process, so that slots do not move with the wall clock.
var slotBase = time.Now()

// Deadlines hands out the Done channels of the requests of one Locker
// whose caller's context cannot be cancelled (context.Background, say):
// such a request ends only at its deadline or at the Locker's Close, and
// rather than a channel and a timer of its own it takes the channel of
// its deadline's slot (one timer per [Slot] for the whole Locker), which
// Close closes too. With them singleredis's serial cycle on rueidis went
// from 1.13 to 1.09 times the raw client's, by the medians of 13 runs
// (docs/benchmarks.md, "Issue 31: one timer per 16 ms slot"). Make it
// with [NewDeadlines]; it is safe for concurrent use.
type Deadlines struct {
	closing context.Context
	stop    func() bool // undoes the registration with closing

	last atomic.Pointer[slot] // the slot handed out last: most requests of a moment share it

	mu     sync.Mutex
	slots  map[int64]*slot
	closed bool
}

// slot is the channel of the requests that end within one Slot.
type slot struct {
	k  int64 // the slot's index from slotBase
	ch chan struct{}
	t  *time.Timer // closes ch at the slot's start
	// once closes ch, by t or by Close, whichever comes first.
	once sync.Once
	// err is why ch was closed (context.DeadlineExceeded by t,
	// context.Canceled by Close): written before ch is closed, read
	// after.
	err error
}

// end closes s's channel for err, unless it was closed already.
func (s *slot) end(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.ch)
	})
}

// The slots of a request whose end has come already, and of one made
// after its Locker's Close.
var (
	expiredSlot = &slot{ch: closedChan, err: context.DeadlineExceeded}
	closedSlot  = &slot{ch: closedChan, err: context.Canceled}
)

// ended returns why s's channel was closed, or nil while it is open.
func (s *slot) ended() error {
	select {
	case <-s.ch:
		return s.err
	default:
		return nil
	}
}

// NewDeadlines returns the Deadlines of a Locker whose Close cancels
// closing: every channel it has handed out, and will hand out, is closed
// then.
func NewDeadlines(closing context.Context) *Deadlines {
	d := &Deadlines{closing: closing, slots: make(map[int64]*slot)}
	d.stop = context.AfterFunc(closing, d.closeAll)
	return d
}

// slotOf returns the slot end falls in, whose channel is closed at the
// slot's start (at once when that has passed) or when d's closing context
// ends. The slot's index counts from slotBase on the monotonic clock, as
// the slot's timer waits, and finding the slot reads no clock when end
// has a reading of it (nearly always: the kit's deadlines count from
// time.Now; making a new slot reads it once), so that
// two requests with the same end share a slot and a step of the wall
// clock does not move it. An end without one (a deadline from
// time.Date, say, or whose reading an overflow stripped) counts from
// now on the wall clock, then from slotBase on the monotonic one, the
// clock read once: counted from slotBase's wall time, a wall clock moved
// since the process began would move the slot past end. An end too far
// away to count in a time.Duration takes the last slot that can (which
// still closes before it).
func (d *Deadlines) slotOf(end time.Time) *slot {
	var since time.Duration // from slotBase to end
	if end == end.Round(0) {
		// Round(0) strips a monotonic reading: end has none.
		now := time.Now()
		since = wallSince(end, now, now.Sub(slotBase))
	} else {
		since = end.Sub(slotBase)
	}
	k := int64(since / Slot)
	if s := d.last.Load(); s != nil && s.k == k {
		return s
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return closedSlot
	}
	s := d.slots[k]
	if s == nil {
		wait := time.Until(slotBase.Add(time.Duration(k) * Slot))
		if wait <= 0 {
			return expiredSlot
		}
		s = &slot{k: k, ch: make(chan struct{})}
		s.t = time.AfterFunc(wait, func() { d.fire(s) })
		d.slots[k] = s
	}
	d.last.Store(s)
	return s
}

// wallSince is the time from slotBase to end for an end without a
// monotonic clock reading: elapsed (now − slotBase on the monotonic
// clock) plus end − now on the wall clock, clamped to the largest
// Duration. A step of the wall clock since slotBase moves neither.
func wallSince(end, now time.Time, elapsed time.Duration) time.Duration {
	left := end.Sub(now)
	if left > math.MaxInt64-elapsed {
		left = math.MaxInt64 - elapsed
	}
	return elapsed + left
}

// fire closes s's channel at the slot's start and forgets s.
func (d *Deadlines) fire(s *slot) {
	d.mu.Lock()
	if d.slots[s.k] == s {
		delete(d.slots, s.k)
	}
	d.last.CompareAndSwap(s, nil)
	d.mu.Unlock()
	s.end(context.DeadlineExceeded)
}

// closeAll closes every slot's channel, for the Locker's Close; the
// channels handed out later are closed already. It may be called more
// than once.
func (d *Deadlines) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.last.Store(nil)
	for k, s := range d.slots {
		// A timer that has started fire may be waiting for d.mu: the
		// channel is closed here all the same (whichever of the two comes
		// first says why), so that it is closed when Close returns.
		s.t.Stop()
		s.end(context.Canceled)
		delete(d.slots, k)
	}
}

// Close closes every channel d has handed out and undoes its registration
// with the closing context: nothing of d's is left running (its timers
// stopped). The Locker's Close calls it after cancelling closing.
func (d *Deadlines) Close() {
	d.stop()
	d.closeAll()
}

// pending returns how many slots have a timer still to run, for tests.
func (d *Deadlines) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.slots)
}

// uncancellable serves [SharedDeadline]: its contexts end at their deadlines
// only.
var uncancellable = NewDeadlines(context.Background())

// SharedDeadline returns a context of ctx, whose Done is nil (it cannot be
// cancelled) and whose deadline d is at least [MinShared] away, that ends
// at d's slot: its Done channel and the timer that closes it are shared
// with the process's other such contexts ending within the same [Slot],
// and it closes up to Slot before d (never after, as far as timers run on
// time). Its Err is context.DeadlineExceeded once Done is closed. It
// returns false, and ctx, when ctx can be cancelled or d is nearer: the
// caller then makes a context of its own (context.WithDeadline). For the
// kit's own request ([Request]) whose deadline is d, "at least MinShared
// away" counts from the request's start, without reading the clock: a
// second command under a request begun with MinShared to go (the EVAL
// after a NOSCRIPT, say) shares its slot too, ending up to Slot early
// however little is left then. The Redis adapters give it
// (redisclient/internal/adapt.WithDone) to a client that watches Done and
// not the deadline (rueidis for a reply, go-redis and redigo while they
// wait for a pooled connection), in place of a timer per request.
func SharedDeadline(ctx context.Context, d time.Time) (context.Context, bool) {
	if ctx.Done() != nil {
		return ctx, false
	}
	if r, ok := ctx.(*Request); ok && r.deadline.Equal(d) {
		// The kit's request knows whether it was begun with MinShared
		// to its deadline: no reading of the clock.
		if !r.long {
			return ctx, false
		}
	} else if time.Until(d) < MinShared {
		return ctx, false
	}
	return &sharedCtx{Context: ctx, deadline: d, slot: uncancellable.slotOf(d)}, true
}

// sharedCtx is a context of SharedDeadline.
type sharedCtx struct {
	context.Context // values
	deadline        time.Time
	slot            *slot
}

func (c *sharedCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *sharedCtx) Done() <-chan struct{}       { return c.slot.ch }
func (c *sharedCtx) Err() error                  { return c.slot.ended() }
