package acquire

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
)

// Outage bounds one Acquire's wait through an outage (lockswap.WithMaxOutage).
// The outage counts from the later of the Acquire's start and the last
// answer the backend gave (a lock, contention, any answer but
// lockswap.ErrUnavailable) to this Acquire or, with a [LastAnswer], to any
// Acquire of the same Locker: an Acquire that waited behind others of its
// Locker while they found the backend down is not given a bound of its
// own on top. Once it has lasted the bound, the wait ends with the last
// attempt's error, which still matches lockswap.ErrUnavailable but is not
// [Retryable]; an Acquire whose bound passed before its first attempt
// (it waited in its Locker's line) still makes that attempt, bounded by
// lockswap.DeadlineGrace.
//
// The bound holds from the outage's start, not from the first failure:
// each attempt's requests get at most what is left of it ([Outage.Wrap]),
// and no retry delay outlasts it ([Outage.Strategy]), so an Acquire that
// finds the backend down from its start returns within the bound plus the
// scheduling delay of its process (lockswap.DeadlineGrace covers that on
// a machine that is not starved of CPU).
//
// Each Acquire has its own, used by one goroutine at a time. A bound of
// zero or less is no bound.
type Outage struct {
	max     time.Duration
	created time.Time
	answer  time.Time              // this Acquire's last answer
	shared  *LastAnswer            // nil: none
	since   time.Time              // the start of the current outage; zero: none under way
	last    error                  // the last attempt's error while an outage is under way
	retry   lockswap.RetryStrategy // what Strategy bounds
}

// LastAnswer is when the backend last answered any Acquire of one Locker:
// the Locker keeps one and hands it to each Acquire's [Outage]. The zero
// value is ready; it is safe for concurrent use.
type LastAnswer struct{ ns atomic.Int64 }

// Answered records an answer now.
func (a *LastAnswer) Answered() { a.answeredAt(time.Now()) }

// answeredAt records an answer at now, a reading the caller already took.
func (a *LastAnswer) answeredAt(now time.Time) { a.ns.Store(now.UnixNano()) }

// at returns the time of the last answer (zero: none, or a nil a).
func (a *LastAnswer) at() time.Time {
	if a == nil {
		return time.Time{}
	}
	if ns := a.ns.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// NewOutage returns the outage bound of one Acquire starting now: max, or
// none when max is zero or less. shared, when not nil, is its Locker's
// [LastAnswer].
func NewOutage(max time.Duration, shared *LastAnswer) *Outage {
	return &Outage{max: max, created: time.Now(), shared: shared}
}

// from returns when an outage that starts now began: the later of the
// Acquire's start and the last answer.
func (o *Outage) from() time.Time {
	from := o.created
	if o.answer.After(from) {
		from = o.answer
	}
	if a := o.shared.at(); a.After(from) {
		from = a
	}
	return from
}

// left returns what is left of the bound at now, and false when there is
// no bound.
func (o *Outage) left(now time.Time) (time.Duration, bool) {
	if o.max <= 0 {
		return 0, false
	}
	since := o.since
	if since.IsZero() {
		since = o.from()
	}
	return since.Add(o.max).Sub(now), true
}

// Wrap returns the attempt function of one Acquire: it calls try with the
// longest its requests may take, limit or what is left of the bound if
// less, and ends the wait once the outage has lasted the bound: before an
// attempt there would be no time left for, or after the attempt that used
// up the bound.
func (o *Outage) Wrap(limit time.Duration, try func(ctx context.Context, timeout time.Duration) (lockswap.Lock, error)) func(context.Context) (lockswap.Lock, error) {
	return func(ctx context.Context) (lockswap.Lock, error) {
		timeout := limit
		if o.max > 0 {
			start := time.Now() // no reading of the clock without a bound
			left, _ := o.left(start)
			switch {
			case left > 0:
				timeout = min(timeout, left)
			case o.last != nil:
				return nil, &outageError{cause: o.last, d: start.Sub(o.since)}
			default:
				// No attempt of this Acquire yet: one, however short.
				timeout = min(timeout, lockswap.DeadlineGrace)
			}
		}
		l, err := try(ctx, timeout)
		if err == nil || !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
			now := time.Now()
			o.since, o.last, o.answer = time.Time{}, nil, now
			if o.shared != nil {
				o.shared.answeredAt(now)
			}
			return l, err
		}
		if o.since.IsZero() {
			o.since = o.from()
		}
		o.last = err
		if o.max > 0 {
			if d := time.Since(o.since); d >= o.max {
				return nil, &outageError{cause: err, d: d}
			}
		}
		return nil, err
	}
}

// Strategy returns s with its delays cut to what is left of the bound, so
// that a wait does not sleep past it: the attempt after such a delay ends
// the wait at the bound.
//
// An Outage serves one Acquire, which calls Strategy once: the strategy
// it returns is the Outage itself (its retry field set to s), so that it
// costs no allocation of its own. A second call re-targets the strategy
// the first returned as well.
func (o *Outage) Strategy(s lockswap.RetryStrategy) lockswap.RetryStrategy {
	if o.max <= 0 || s == nil {
		return s
	}
	o.retry = s
	return (*boundedStrategy)(o)
}

// boundedStrategy is an Outage seen as the strategy Strategy returns:
// o.retry's delays, cut to what is left of the bound.
type boundedStrategy Outage

func (b *boundedStrategy) NextDelay(attempt int) (time.Duration, bool) {
	o := (*Outage)(b)
	d, ok := o.retry.NextDelay(attempt)
	if !ok || o.last == nil {
		return d, ok
	}
	left, _ := o.left(time.Now())
	return min(d, max(left, 0)), true
}
