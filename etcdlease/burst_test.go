package etcdlease

import (
	"context"
	"errors"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
)

// burstWaiters is how many waiters TestGiveUpBurst starts
// (-burst-waiters=10000 for the size of issue 28).
var burstWaiters = flag.Int("burst-waiters", 200, "waiters of TestGiveUpBurst")

// TestGiveUpBurst: many waiters of one Locker that give up at once (their
// contexts end together) each return within the cancel + DeadlineGrace,
// plus the scheduler's delays (docs/errors.md), and their queue keys are
// gone soon after.
func TestGiveUpBurst(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 5*time.Minute)
	holder, waiters := openT(t, srv.Endpoints(), "burst/"), openT(t, srv.Endpoints(), "burst/")
	held, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	n := *burstWaiters
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	returned := make([]time.Time, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiters.Acquire(wctx, "k")
			returned[i], errs[i] = time.Now(), err
			if l != nil {
				l.Release(ctx)
			}
		}()
	}
	queued := func(want int64) func() bool {
		return func() bool { return queueLen(t, holder.Client(), holder, "k") == want }
	}
	started := time.Now()
	waitFor(t, time.Minute, "the waiters never all queued", queued(int64(n)+1))
	t.Logf("%d waiters queued in %v", n, time.Since(started).Round(time.Millisecond))
	probe := conformance.StartLagProbe()
	gaveUp := time.Now()
	cancel()
	wg.Wait()
	probe.Stop()
	last := time.Duration(0)
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiter that gave up: %v, want context.Canceled", err)
		}
		last = max(last, returned[i].Sub(gaveUp))
	}
	t.Logf("%d waiters gave up, the last returned %v after the cancel (allowed %v, lags up to %v)", n,
		last.Round(time.Millisecond), probe.Allowance().Round(time.Millisecond), probe.Max().Round(time.Millisecond))
	if last > probe.Allowance() {
		t.Errorf("a waiter returned %v after the cancel, want within %v (DeadlineGrace %v + the scheduler's delays, lags up to %v)",
			last.Round(time.Millisecond), probe.Allowance().Round(time.Millisecond), lockswap.DeadlineGrace, probe.Max().Round(time.Millisecond))
	}
	waitFor(t, 30*time.Second, "the queue keys of the waiters that gave up still there", queued(1))
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
