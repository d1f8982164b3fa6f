// Package background runs a Locker's cleanup that outlives its caller: the
// release of a lock taken by a request that completed after its caller gave
// up, or a release whose outcome was still unknown at the caller's
// deadline. The work runs on the Locker's time, not the caller's, and
// [Group.Close] ends it, so that no goroutine outlives the Locker's Close.
package background

import (
	"context"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
)

// CloseWait is how long [Group.Close] lets running work finish before it
// cancels it. Work observes the cancellation within one retry step (see
// [Retry]), so Close returns well within a second.
const CloseWait = 500 * time.Millisecond

// Step bounds one request of a background retry loop: a request to a
// server that does not answer is abandoned after Step, so that the loop
// sees its context end (clients such as go-redis obey deadlines, not
// cancellation).
const Step = 200 * time.Millisecond

// Group runs background work for one Locker. The zero value is ready to
// use; it is safe for concurrent use.
type Group struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
}

// Go runs fn in a new goroutine with a context that keeps the values of
// parent, ends after lockswap.CleanupTimeout, and ends at once when the
// Group is closed. It reports false, without running fn, when the Group is
// already closed.
func (g *Group) Go(parent context.Context, fn func(ctx context.Context)) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
	g.wg.Add(1)
	gctx := g.ctx
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), lockswap.CleanupTimeout)
	stop := context.AfterFunc(gctx, cancel)
	go func() {
		defer g.wg.Done()
		defer cancel()
		defer stop()
		fn(ctx)
	}()
	return true
}

// Close refuses new work, lets running work finish for up to CloseWait,
// then cancels it and waits for it to return.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	cancel := g.cancel
	g.mu.Unlock()
	if cancel == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(CloseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	cancel()
	<-done
}

// Retry calls op until it reports done or ctx ends, each call under a
// context bounded by Step, with a short pause between calls. It is the loop
// of a background release: op must be idempotent (a compare-and-delete is).
func Retry(ctx context.Context, op func(ctx context.Context) (done bool)) {
	pause := 10 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, Step)
		done := op(sctx)
		cancel()
		if done || ctx.Err() != nil {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if pause < 100*time.Millisecond {
			pause *= 2
		}
	}
}
