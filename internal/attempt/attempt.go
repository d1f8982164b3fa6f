// Package attempt runs one acquisition attempt of a remote lock so that a
// caller who gives up while the request is on its way leaves no lock
// behind.
//
// A request already written to the server runs there whether or not the
// client still waits for its reply. If the client returned at the
// cancellation (redigo's DoContext does, and its write may even happen
// after it returned), a request that then takes the lock leaves it held
// until its TTL, as a crashed holder would. [Run] instead lets the attempt
// finish, for a short [Grace] after the caller's context ended, and gives
// back a lock that the caller no longer wants.
package attempt

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
)

// Grace is how long an attempt may still run after its caller's context
// ended: enough for a reply on its way, not enough to hold up a cancelled
// caller noticeably. A reply later than that is abandoned as before.
const Grace = 250 * time.Millisecond

// Run calls try with a context that keeps ctx's values and ends Grace after
// ctx does. When try took the lock but ctx had ended by then, the lock is
// released (under lockswap.CleanupContext) and Run returns an error that
// matches ctx.Err(). A context that cannot end costs nothing extra.
func Run(ctx context.Context, try func(context.Context) (lockswap.Lock, error)) (lockswap.Lock, error) {
	if ctx.Done() == nil {
		return try(ctx)
	}
	actx, stop := graceContext(ctx)
	l, err := try(actx)
	stop()
	if err != nil || ctx.Err() == nil {
		return l, err
	}
	rctx, cancel := lockswap.CleanupContext(ctx)
	defer cancel()
	if rerr := l.Release(rctx); rerr != nil {
		return nil, fmt.Errorf("acquired %q as the wait was given up; releasing it failed (it expires at its TTL): %v: %w", l.Key(), rerr, ctx.Err())
	}
	return nil, fmt.Errorf("acquired %q as the wait was given up; released it: %w", l.Key(), ctx.Err())
}

// graceContext returns a context with ctx's values that ends Grace after
// ctx ends, and a function that releases its resources.
func graceContext(ctx context.Context) (context.Context, func()) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
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
	return gctx, func() {
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
