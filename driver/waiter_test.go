package driver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/acquire"
)

// waiter is a fake driver that waits without polling: Wait blocks until
// free is closed (or its context ends), and counts its calls.
type waiter struct {
	fake
	free  chan struct{}
	waits chan *driver.Outage
	bound time.Time
	claim chan *driver.Claim[int]
	deaf  bool // Wait ignores its context (a reply already on its way)
}

func (w *waiter) Wait(ctx context.Context, c *driver.Claim[int], o *driver.Outage) (driver.Grant, error) {
	w.waits <- o
	if w.deaf {
		<-w.free
	} else {
		select {
		case <-w.free:
		case <-ctx.Done():
			return driver.Grant{}, acquire.WaitError(lockswap.ErrHeld, ctx.Err())
		}
	}
	c.Data = 7
	if w.claim != nil {
		w.claim <- c
	}
	return driver.Grant{Fence: 3}, nil
}

func (w *waiter) Bound(*driver.Claim[int]) time.Time { return w.bound }

func newWaiter(t *testing.T) (*waiter, *driver.Locker[int]) {
	t.Helper()
	w := &waiter{free: make(chan struct{}), waits: make(chan *driver.Outage, 10)}
	lk, err := driver.New[int](w, driver.Config{Name: "waiter", Fence: true, Queue: true,
		Retry: lockswap.ConstantRetry(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return w, lk
}

// TestWaiter: Acquire goes through the driver's Wait (once when it takes
// the lock, with the call's outage bound, without the local queue);
// TryAcquire still makes one attempt; errors carry the kit's prefix.
func TestWaiter(t *testing.T) {
	w, lk := newWaiter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan error, 1)
	var l lockswap.Lock
	go func() {
		var err error
		l, err = lk.Acquire(ctx, "k", lockswap.WithMaxOutage(3*time.Second))
		got <- err
	}()
	o := <-w.waits
	if o.Limit() != 3*time.Second {
		t.Errorf("Wait's outage bound %v, want the call's 3s", o.Limit())
	}
	if n := lk.Waiting("k"); n != 0 {
		t.Errorf("Waiting = %d, want 0: a Waiter's calls do not use the local queue", n)
	}
	close(w.free)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if f, ok := l.Fence(); !ok || f != 3 {
		t.Errorf("Fence = %d, %v; want 3 from the Grant", f, ok)
	}
	if d, ok := driver.Data[int](l); !ok || d != 7 {
		t.Errorf("Data = %d, %v; want 7", d, ok)
	}
	if len(w.waits) != 0 {
		t.Errorf("%d more Wait calls, want 1", len(w.waits))
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lk.TryAcquire(ctx, "k"); err != nil || len(w.waits) != 0 {
		t.Errorf("TryAcquire: %v, %d Wait calls; want one attempt through Acquire", err, len(w.waits))
	}

	// The context ends the wait: the driver's error, prefixed, matching
	// what it waited for and the context.
	w.free = make(chan struct{})
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond) // not passed before the first attempt on a loaded machine
	defer scancel()
	_, err := lk.Acquire(sctx, "k")
	if !errors.Is(err, lockswap.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) || !startsWith(err, `waiter: acquire "k": `) {
		t.Errorf("Acquire ended by its context: %v", err)
	}
	<-w.waits
}

// TestWaiterEndedByClose: Close cancels a Wait; the error matches
// lockswap.ErrClosed.
func TestWaiterEndedByClose(t *testing.T) {
	w, lk := newWaiter(t)
	got := make(chan error, 1)
	go func() {
		_, err := lk.Acquire(context.Background(), "k")
		got <- err
	}()
	<-w.waits
	lk.Close()
	select {
	case err := <-got:
		if !errors.Is(err, lockswap.ErrClosed) {
			t.Errorf("Acquire ended by Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

// TestWaiterLateGrantGivenBack: a Wait that takes the lock after its
// caller gave up gets no lock, and the kit releases it.
func TestWaiterLateGrantGivenBack(t *testing.T) {
	w, lk := newWaiter(t)
	w.claim = make(chan *driver.Claim[int], 1)
	released := make(chan struct{})
	w.release = func(context.Context, *driver.Claim[int]) error { close(released); return nil }
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	// The wait succeeds only after the context ended.
	block := w.free
	w.deaf = true
	go func() {
		_, err := lk.Acquire(ctx, "k")
		got <- err
	}()
	<-w.waits
	cancel()
	close(block)
	err := <-got
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want context.Canceled", err)
	}
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("a lock taken after the caller gave up was not released")
	}
}

// TestLoseAndBound: a lock whose driver calls Claim.Lose ends (Done
// closes, Extend reports ErrLost without asking the driver, Release after
// Close reports ErrClosed alone, saying the lock was lost), and Deadline is never later than
// the driver's Bound.
func TestLoseAndBound(t *testing.T) {
	w, lk := newWaiter(t)
	w.claim = make(chan *driver.Claim[int], 1)
	close(w.free)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bound := time.Now().Add(time.Second)
	w.bound = bound
	l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := <-w.claim
	if !l.Deadline().Equal(bound) {
		t.Errorf("Deadline %v, want the driver's earlier bound %v", l.Deadline(), bound)
	}
	w.bound = time.Now().Add(time.Hour)
	if d := l.Deadline(); d.After(time.Now().Add(time.Minute)) {
		t.Errorf("Deadline %v beyond the TTL although the bound is later", d)
	}
	select {
	case <-c.Done():
		t.Fatal("Claim.Done closed while the lock is held")
	default:
	}
	c.Lose()
	select {
	case <-l.Done():
	default:
		t.Fatal("Done still open after Claim.Lose")
	}
	<-c.Done()
	var extends int
	w.extend = func(context.Context, *driver.Claim[int], time.Duration) (driver.Grant, error) {
		extends++
		return driver.Grant{}, nil
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, lockswap.ErrLost) || extends != 0 {
		t.Errorf("Extend of a lost lock: %v after %d driver calls; want ErrLost and none", err, extends)
	}
	lk.Close()
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrClosed) || errors.Is(err, lockswap.ErrLost) || !strings.Contains(err.Error(), "lost") {
		t.Errorf("Release of a lost lock after Close: %v, want ErrClosed alone (one sentinel), saying the lock was lost", err)
	}
}

func startsWith(err error, prefix string) bool {
	return err != nil && len(err.Error()) >= len(prefix) && err.Error()[:len(prefix)] == prefix
}

// outageWaiter is a Waiter whose every attempt fails as an outage after
// the backend answered (or not) as the test says.
type outageWaiter struct {
	fake
	calls   int
	answers int // the first answers attempts get an answer before failing
}

func (w *outageWaiter) Wait(ctx context.Context, c *driver.Claim[int], o *driver.Outage) (driver.Grant, error) {
	w.calls++
	if w.calls <= w.answers {
		o.Answered()
	}
	return driver.Grant{}, errLostReply
}

// TestWaiterOutage: the kit tries a Waiter again after an outage, per the
// retry policy, and gives up with ErrUnavailable once the backend has not
// answered for the call's outage bound, counted from its last answer.
func TestWaiterOutage(t *testing.T) {
	w := &outageWaiter{answers: 5}
	lk, err := driver.New[int](w, driver.Config{Name: "outage", Retry: lockswap.ConstantRetry(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	start := time.Now()
	_, err = lk.Acquire(context.Background(), "k", lockswap.WithMaxOutage(100*time.Millisecond))
	took := time.Since(start)
	if !errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(err.Error(), "WithMaxOutage") {
		t.Fatalf("Acquire: %v, want ErrUnavailable naming WithMaxOutage", err)
	}
	// 5 answered attempts 20 ms apart, then 100 ms without an answer.
	if w.calls < 6 || took < 180*time.Millisecond {
		t.Errorf("gave up after %d attempts and %v, want the outage counted from the last answer", w.calls, took)
	}
	w.calls, w.answers = 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = lk.Acquire(ctx, "k", lockswap.WithMaxOutage(-1))
	if !errors.Is(err, lockswap.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || w.calls < 2 {
		t.Errorf("Acquire with no outage bound: %v after %d attempts, want ErrUnavailable and the context's error", err, w.calls)
	}
}

// TestWaiterPermits: with Config.WaitPermits, Acquire of a permit goes
// through the driver's Wait with the limit in Claim.Permits; without it,
// a permit's Acquire polls the driver's Acquire and never calls Wait.
func TestWaiterPermits(t *testing.T) {
	for _, waitPermits := range []bool{true, false} {
		w := &waiter{free: make(chan struct{}), waits: make(chan *driver.Outage, 10), claim: make(chan *driver.Claim[int], 1)}
		var polled atomic.Int64
		w.acquire = func(_ context.Context, c *driver.Claim[int]) (driver.Grant, error) {
			polled.Add(1)
			return driver.Grant{Slot: 1}, nil
		}
		close(w.free)
		lk, err := driver.New[int](w, driver.Config{Name: "waiter", Permits: true, WaitPermits: waitPermits,
			Retry: lockswap.ConstantRetry(time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		l, err := lk.Acquire(context.Background(), "k", lockswap.WithPermits(4))
		if err != nil {
			t.Fatal(err)
		}
		if waitPermits {
			select {
			case c := <-w.claim:
				if c.Permits != 4 || polled.Load() != 0 {
					t.Errorf("WaitPermits: Wait's Claim.Permits = %d, Acquire polled %d times; want 4 and none", c.Permits, polled.Load())
				}
			default:
				t.Errorf("WaitPermits: Acquire of a permit did not go through Wait (it polled %d times)", polled.Load())
			}
		} else if len(w.waits) != 0 || polled.Load() != 1 {
			t.Errorf("without WaitPermits: %d Waits and %d polls, want none and one", len(w.waits), polled.Load())
		}
		l.Release(context.Background())
		lk.Close()
	}
}
