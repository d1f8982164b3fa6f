package acquire

import (
	"context"
	"errors"
	"time"

	"github.com/lockswap/lockswap"
)

// Outage bounds one Acquire's wait through an outage (lockswap.WithMaxOutage).
// The outage counts from the start of its first attempt: the Acquire's
// first attempt, or the first after an attempt that reached the backend
// (a lock, contention, any answer but lockswap.ErrUnavailable). Once it
// has lasted the bound, the wait ends with the last attempt's error, which
// still matches lockswap.ErrUnavailable but is not [Retryable].
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
	max   time.Duration
	since time.Time // the start of the current outage's first attempt; zero: none under way
	last  error     // the last attempt's error while an outage is under way
}

// NewOutage returns the outage bound of one Acquire: max, or none when max
// is zero or less.
func NewOutage(max time.Duration) *Outage { return &Outage{max: max} }

// left returns what is left of the bound at now, and false when there is
// no bound. While no outage is under way the whole bound is left.
func (o *Outage) left(now time.Time) (time.Duration, bool) {
	if o.max <= 0 {
		return 0, false
	}
	if o.since.IsZero() {
		return o.max, true
	}
	return o.since.Add(o.max).Sub(now), true
}

// Wrap returns the attempt function of one Acquire: it calls try with the
// longest its requests may take, limit or what is left of the bound if
// less, and ends the wait once the outage has lasted the bound: before an
// attempt there would be no time left for, or after the attempt that used
// up the bound.
func (o *Outage) Wrap(limit time.Duration, try func(ctx context.Context, timeout time.Duration) (lockswap.Lock, error)) func(context.Context) (lockswap.Lock, error) {
	return func(ctx context.Context) (lockswap.Lock, error) {
		start := time.Now()
		timeout := limit
		if left, bounded := o.left(start); bounded {
			if left <= 0 {
				return nil, &outageError{cause: o.last, d: start.Sub(o.since)}
			}
			timeout = min(timeout, left)
		}
		l, err := try(ctx, timeout)
		if err == nil || !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
			o.since, o.last = time.Time{}, nil
			return l, err
		}
		if o.since.IsZero() {
			o.since = start
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
func (o *Outage) Strategy(s lockswap.RetryStrategy) lockswap.RetryStrategy {
	if o.max <= 0 || s == nil {
		return s
	}
	return boundedStrategy{s: s, o: o}
}

type boundedStrategy struct {
	s lockswap.RetryStrategy
	o *Outage
}

func (b boundedStrategy) NextDelay(attempt int) (time.Duration, bool) {
	d, ok := b.s.NextDelay(attempt)
	if !ok || b.o.since.IsZero() {
		return d, ok
	}
	left, _ := b.o.left(time.Now())
	return min(d, max(left, 0)), true
}
