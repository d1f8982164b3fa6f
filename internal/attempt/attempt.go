// Package attempt bounds the requests of a remote lock by the caller's
// deadline and leaves no lock behind when the caller gives up.
//
// A request already written to the server runs there whether or not the
// client still waits for its reply. If the client returned at the
// cancellation (redigo's DoContext does, and its write may even happen
// after it returned), a request that then takes the lock leaves it held
// until its TTL, as a crashed holder would. A request context from
// [Context] instead lets the attempt finish, for a short grace
// (lockswap.DeadlineGrace) after the caller's context ended, so that the
// kit (package driver) can give back a lock that the caller no longer
// wants. [Release] runs an idempotent release request within the
// caller's deadline and goes on in the background when its outcome is
// still unknown then.
//
// Every request context made here carries a deadline (clients such as
// go-redis obey deadlines, not cancellation): the caller's deadline plus
// the grace, and never more than [Timeout] from now.
package attempt

import (
	"context"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/background"
)

// Grace is how long an attempt may still run after its caller's context
// ended: enough for a reply on its way, not enough to hold up a cancelled
// caller noticeably.
const Grace = lockswap.DeadlineGrace

// Timeout bounds one request whatever the caller's context: a server that
// accepts and never answers fails the attempt (as an outage) after Timeout,
// so that a wait with context.Background() still ends (see
// lockswap.DefaultMaxOutage).
const Timeout = lockswap.RequestTimeout

// Limit returns the deadline [Context] would give a request made for ctx
// now, without making a context.
func Limit(ctx context.Context, max time.Duration) time.Time {
	now := time.Now()
	limit := now.Add(max)
	if ctx.Err() != nil {
		if g := now.Add(Grace); g.Before(limit) {
			limit = g
		}
		return limit
	}
	if d, ok := ctx.Deadline(); ok {
		if g := d.Add(Grace); g.Before(limit) {
			limit = g
		}
	}
	return limit
}

// Context returns the context for one request made for ctx: it keeps ctx's
// values, ends Grace after ctx ends (Grace from now if ctx has already
// ended) and at the latest max from now, and carries that bound as its
// deadline. The returned function releases its resources.
func Context(ctx context.Context, max time.Duration) (context.Context, func()) {
	now := time.Now()
	limit := now.Add(max)
	if ctx.Err() != nil {
		if g := now.Add(Grace); g.Before(limit) {
			limit = g
		}
		return context.WithDeadline(context.WithoutCancel(ctx), limit)
	}
	if d, ok := ctx.Deadline(); ok {
		if g := d.Add(Grace); g.Before(limit) {
			limit = g
		}
	}
	if ctx.Done() == nil {
		// Nothing can cancel ctx: the request needs only the bound, which
		// clients read as a socket deadline. No timer, no channel.
		return &boundCtx{Context: ctx, deadline: limit}, func() {}
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), limit)
	// A cancellation (as opposed to the deadline) ends the request Grace
	// later.
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(Grace, cancel)
		}
	})
	return rctx, func() {
		stopAfter()
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// boundCtx is a context that nothing cancels, with a deadline: the bound
// of one request, read by the clients as the deadline of their socket
// operations. Like any context, it reports no error until something
// cancels it, which nothing does; callers that loop check the time
// against [Deadline] instead.
type boundCtx struct {
	context.Context
	deadline time.Time
}

func (c *boundCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Ended reports whether rctx, a context from [Context], has ended: its
// deadline has passed or it was cancelled.
func Ended(rctx context.Context) bool {
	if rctx.Err() != nil {
		return true
	}
	d, ok := rctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Release goes on with a release whose first request (made by the caller,
// under a context from [Context] started at start, whose deadline was
// limit) failed with an unknown outcome: retry reports true for its error
// err. It calls op, the same idempotent request, again until it gives an
// answer that retrying cannot change, within limit (and within Grace of
// ctx's end when ctx is cancelled meanwhile). When the outcome is still
// unknown then, it goes on in the background in g, up to
// lockswap.CleanupTimeout from start, calling then(v, err) with its final
// answer, and Release returns the last error with pending true. Otherwise
// it returns op's answer and pending false (then is not called).
//
// The first request stays with the caller so that a release that succeeds
// at once (nearly all of them) costs no closure and no goroutine.
func Release[T any](ctx context.Context, g *background.Group, start, limit time.Time, v T, err error, op func(context.Context) (T, error), retry func(error) bool, then func(T, error)) (T, error, bool) {
	pause := 5 * time.Millisecond
	for err != nil && retry(err) {
		if ctx.Err() != nil {
			if g := time.Now().Add(Grace); g.Before(limit) {
				limit = g
			}
		}
		wait := min(pause, time.Until(limit))
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		<-t.C
		if pause < 100*time.Millisecond {
			pause *= 2
		}
		if !time.Now().Before(limit) {
			break
		}
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), limit)
		v, err = op(rctx)
		cancel()
	}
	if err == nil || !retry(err) {
		return v, err, false
	}
	left := lockswap.CleanupTimeout - time.Since(start)
	if left <= 0 || g == nil {
		return v, err, false
	}
	started := g.Go(ctx, func(bctx context.Context) {
		bctx, cancel := context.WithTimeout(bctx, left)
		defer cancel()
		var (
			bv   T
			berr error
		)
		background.Retry(bctx, func(sctx context.Context) bool {
			bv, berr = op(sctx)
			return berr == nil || !retry(berr)
		})
		if then != nil {
			then(bv, berr)
		}
	})
	return v, err, started
}
