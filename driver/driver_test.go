package driver_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// fake is a driver whose requests the test scripts. Unset functions
// succeed.
type fake struct {
	acquire  func(ctx context.Context, c *driver.Claim[int]) (driver.Grant, error)
	extend   func(ctx context.Context, c *driver.Claim[int], ttl time.Duration) (driver.Grant, error)
	release  func(ctx context.Context, c *driver.Claim[int]) error
	released atomic.Int64 // Release calls
}

func (f *fake) Acquire(ctx context.Context, c *driver.Claim[int]) (driver.Grant, error) {
	if f.acquire != nil {
		return f.acquire(ctx, c)
	}
	return driver.Grant{}, nil
}

func (f *fake) Extend(ctx context.Context, c *driver.Claim[int], ttl time.Duration) (driver.Grant, error) {
	if f.extend != nil {
		return f.extend(ctx, c, ttl)
	}
	return driver.Grant{}, nil
}

func (f *fake) Release(ctx context.Context, c *driver.Claim[int]) error {
	f.released.Add(1)
	if f.release != nil {
		return f.release(ctx, c)
	}
	return nil
}

// errLostReply is a transport error: the request may have been applied.
var errLostReply = fmt.Errorf("reply lost: %w", lockswap.ErrUnavailable)

func isLostReply(err error) bool { return errors.Is(err, errLostReply) }

func newLocker(t *testing.T, f *fake, cfg driver.Config) *driver.Locker[int] {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "fake"
	}
	cfg.Uncertain = isLostReply
	lk, err := driver.New[int](f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// waitFor polls cond for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestErrorsNameBackendOpAndKey: the kit prefixes the driver's error with
// the backend, the operation and the key, and keeps its sentinel.
func TestErrorsNameBackendOpAndKey(t *testing.T) {
	f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
		return driver.Grant{}, lockswap.ErrHeld
	}}
	_, err := newLocker(t, f, driver.Config{}).TryAcquire(context.Background(), "k")
	if !errors.Is(err, lockswap.ErrHeld) || err.Error() != `fake: acquire "k": lock held by another owner` {
		t.Fatalf("err = %v", err)
	}
}

// TestTTLRange: a default TTL outside the backend's range is refused by
// New, a call's TTL outside it by the call, before the driver hears of it.
func TestTTLRange(t *testing.T) {
	f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
		t.Error("the driver was asked for a TTL outside its range")
		return driver.Grant{}, nil
	}}
	for _, cfg := range []driver.Config{
		{Name: "fake", TTL: time.Millisecond},
		{Name: "fake", MinTTL: time.Second, MaxTTL: time.Millisecond * 500},
		{Name: "fake", MaxTTL: time.Second, TTL: 2 * time.Second},
		{Name: ""},
	} {
		if _, err := driver.New[int](f, cfg); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("New(%+v): err = %v, want ErrInvalid", cfg, err)
		}
	}
	lk := newLocker(t, f, driver.Config{MinTTL: time.Second, MaxTTL: time.Minute})
	if min, max := lk.TTLRange(); min != time.Second || max != time.Minute {
		t.Errorf("TTLRange() = %v, %v", min, max)
	}
	for _, ttl := range []time.Duration{500 * time.Millisecond, 2 * time.Minute} {
		if _, err := lk.TryAcquire(context.Background(), "k", lockswap.WithTTL(ttl)); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), `"k"`) {
			t.Errorf("TryAcquire WithTTL(%v): err = %v, want ErrInvalid naming the key", ttl, err)
		}
	}
}

// TestReleaseDoesNotWaitBehindAHungExtend: Extend and Release of one lock
// take turns, but a Release does not wait for its turn past its own
// deadline: with an Extend hung on a server that does not answer, it
// returns ErrUnavailable within its deadline plus the grace, and leaves
// the lock alone.
func TestReleaseDoesNotWaitBehindAHungExtend(t *testing.T) {
	inExtend, unhang := make(chan struct{}), make(chan struct{})
	f := &fake{extend: func(ctx context.Context, _ *driver.Claim[int], _ time.Duration) (driver.Grant, error) {
		close(inExtend)
		select {
		case <-unhang:
		case <-ctx.Done():
		}
		return driver.Grant{}, errLostReply
	}}
	lk := newLocker(t, f, driver.Config{})
	l, err := lk.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	extended := make(chan error)
	go func() { extended <- l.Extend(context.Background(), 10*time.Second) }()
	<-inExtend
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.Release(ctx)
	took := time.Since(start)
	if !errors.Is(err, lockswap.ErrUnavailable) {
		t.Errorf("Release behind a hung Extend: err = %v, want ErrUnavailable", err)
	}
	if limit := 200*time.Millisecond + lockswap.DeadlineGrace + 300*time.Millisecond; took > limit {
		t.Errorf("Release took %v behind a hung Extend, want within its deadline plus the grace (%v with slack)", took, limit)
	}
	if n := f.released.Load(); n != 0 {
		t.Errorf("the driver's Release was called %d times while the Extend held the lock's turn", n)
	}
	close(unhang)
	if err := <-extended; !errors.Is(err, lockswap.ErrUnavailable) {
		t.Errorf("Extend: err = %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release once the Extend returned: %v", err)
	}
}

// TestUncertainReleaseGoesOnInTheBackground: a release whose outcome stays
// unknown at the caller's deadline returns ErrUnavailable and is retried
// in the background until it is confirmed.
func TestUncertainReleaseGoesOnInTheBackground(t *testing.T) {
	var answer, confirmed atomic.Bool // answer: the server answers again
	f := &fake{release: func(ctx context.Context, _ *driver.Claim[int]) error {
		if !answer.Load() {
			return errLostReply
		}
		confirmed.Store(true)
		return nil
	}}
	lk := newLocker(t, f, driver.Config{})
	l, err := lk.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	err = l.Release(ctx)
	if !errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(err.Error(), "background") {
		t.Fatalf("Release with an unknown outcome: err = %v, want ErrUnavailable saying it goes on in the background", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done is open after a Release that goes on in the background")
	}
	answer.Store(true)
	waitFor(t, "the background release was never confirmed", confirmed.Load)
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release after the background confirmed it: %v, want nil", err)
	}
}

// TestUndoAttemptWithUnknownOutcome: an attempt whose request may have
// taken the lock (Config.Undo) is released by its own token in the
// background; one that certainly did not is not.
func TestUndoAttemptWithUnknownOutcome(t *testing.T) {
	var mu sync.Mutex
	var tried, undone []string
	f := &fake{
		acquire: func(_ context.Context, c *driver.Claim[int]) (driver.Grant, error) {
			mu.Lock()
			defer mu.Unlock()
			tried = append(tried, c.Token)
			return driver.Grant{}, errLostReply
		},
		release: func(_ context.Context, c *driver.Claim[int]) error {
			mu.Lock()
			defer mu.Unlock()
			undone = append(undone, c.Token)
			return nil
		},
	}
	lk := newLocker(t, f, driver.Config{Undo: isLostReply})
	if _, err := lk.TryAcquire(context.Background(), "k"); !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	waitFor(t, "the attempt with an unknown outcome was never undone", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(undone) == 1
	})
	mu.Lock()
	if undone[0] != tried[0] {
		t.Errorf("undone token %q, want the attempt's %q", undone[0], tried[0])
	}
	mu.Unlock()

	f2 := &fake{acquire: f.acquire}
	lk2 := newLocker(t, f2, driver.Config{})
	lk2.TryAcquire(context.Background(), "k")
	lk2.Close() // waits for background work: an undo would have run by now
	if n := f2.released.Load(); n != 0 {
		t.Errorf("without Config.Undo the kit released %d times", n)
	}
}

// TestCloseEndsBackgroundWork: Close cancels a background release that
// never completes, and nothing is sent for it after Close returns.
func TestCloseEndsBackgroundWork(t *testing.T) {
	f := &fake{release: func(context.Context, *driver.Claim[int]) error { return errLostReply }}
	lk, err := driver.New[int](f, driver.Config{Name: "fake", Uncertain: isLostReply})
	if err != nil {
		t.Fatal(err)
	}
	l := releasePending(t, lk)
	start := time.Now()
	lk.Close()
	if took := time.Since(start); took > time.Second+300*time.Millisecond {
		t.Errorf("Close took %v with a release retrying in the background, want within 1s", took)
	}
	n := f.released.Load()
	if err := l.Release(context.Background()); !errors.Is(err, lockswap.ErrClosed) {
		t.Errorf("Release after Close: err = %v, want ErrClosed", err)
	}
	if m := f.released.Load(); m != n {
		t.Errorf("%d releases sent after Close", m-n)
	}
}

// releasePending takes a lock of lk, whose driver's Release never learns
// its outcome, and releases it with a short deadline: the release goes on
// in the background.
func releasePending(t *testing.T, lk *driver.Locker[int]) lockswap.Lock {
	t.Helper()
	l, err := lk.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("Release: err = %v, want ErrUnavailable (going on in the background)", err)
	}
	return l
}

// handOverFake is a fake that hands over.
type handOverFake struct {
	*fake
	handOver func(ctx context.Context, held, next *driver.Claim[int]) (driver.Grant, error, func() error)
}

// newHandOverFake returns a handOverFake whose first attempt takes the
// lock and every later one finds it held, and whose Release stores the
// tokens it releases in released. Its handOver is for the test to set.
func newHandOverFake(released *sync.Map) *handOverFake {
	var calls atomic.Int64
	return &handOverFake{fake: &fake{
		acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
			if calls.Add(1) == 1 {
				return driver.Grant{}, nil
			}
			return driver.Grant{}, lockswap.ErrHeld
		},
		release: func(_ context.Context, c *driver.Claim[int]) error {
			released.Store(c.Token, true)
			return nil
		},
	}}
}

func (f *handOverFake) HandOver(ctx context.Context, held, next *driver.Claim[int]) (driver.Grant, error, func() error) {
	return f.handOver(ctx, held, next)
}

// waitQueued waits until n goroutines are blocked waiting in the local
// queue (between attempts).
func waitQueued(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d waiters blocked in the queue", n), func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		count := 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "localq.(*Queue).AcquireOffer") {
				count++
			}
		}
		return count >= n
	})
}

// TestHandOverDeliversBeforeTheReleaseIsDecided: the waiter a release hands
// the lock to gets it from the hand-over's answer, not after the rest of
// the release (more rounds, for redlock) is decided.
func TestHandOverDeliversBeforeTheReleaseIsDecided(t *testing.T) {
	decide := make(chan struct{})
	var tokens sync.Map // token → released
	f := newHandOverFake(&tokens)
	f.handOver = func(_ context.Context, held, next *driver.Claim[int]) (driver.Grant, error, func() error) {
		next.Data = 7
		return driver.Grant{}, nil, func() error { <-decide; return nil }
	}
	lk, err := driver.New[int](f, driver.Config{Name: "fake", Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	held, err := lk.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan lockswap.Lock, 1)
	go func() {
		l, err := lk.Acquire(ctx, "k", lockswap.WithRetry(lockswap.ConstantRetry(time.Hour)))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	waitQueued(t, 1)
	released := make(chan error, 1)
	go func() { released <- held.Release(ctx) }()
	var l lockswap.Lock
	select {
	case l = <-got:
	case <-time.After(5 * time.Second):
		close(decide)
		t.Fatal("the waiter got nothing within 5s while the release was still being decided")
	}
	select {
	case err := <-released:
		t.Fatalf("Release returned (%v) before its release was decided", err)
	default:
	}
	close(decide)
	if err := <-released; err != nil {
		t.Fatalf("Release: %v", err)
	}
	if d, ok := driver.Data[int](l); !ok || d != 7 {
		t.Errorf("the waiter's lock has Data %v, %v; want what the hand-over set", d, ok)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("the waiter's Release: %v", err)
	}
	if _, ok := tokens.Load(l.Token()); !ok {
		t.Error("the waiter's Release did not release the handed-over claim")
	}
}

// TestNoLockPastItsDeadline: a lock whose validity the attempt used up is
// given back instead of returned already past its Deadline. A slow attempt
// is a failed attempt, not bad input: TryAcquire fails with
// ErrUnavailable, and Acquire tries again (until its outage bound, which
// the slow attempts count toward).
func TestNoLockPastItsDeadline(t *testing.T) {
	var slow atomic.Int32 // attempts still to answer too late
	f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
		if slow.Add(-1) >= 0 {
			return driver.Grant{Deadline: time.Now().Add(-time.Millisecond)}, nil
		}
		return driver.Grant{}, nil
	}}
	lk := newLocker(t, f, driver.Config{Retry: lockswap.ConstantRetry(time.Millisecond)})
	ctx := context.Background()

	slow.Store(1)
	before := f.released.Load()
	l, err := lk.TryAcquire(ctx, "k")
	if l != nil || !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "no validity") {
		t.Errorf("TryAcquire: (%v, %v), want no lock and ErrUnavailable saying the attempt left no validity", l, err)
	}
	waitFor(t, "TryAcquire: the expired lock was not given back", func() bool { return f.released.Load() > before })

	slow.Store(2)
	before = f.released.Load()
	l, err = lk.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire after two slow attempts: %v, want the lock of the third", err)
	}
	if !time.Now().Before(l.Deadline()) {
		t.Errorf("Acquire returned a lock already past its Deadline %v", l.Deadline())
	}
	l.Release(ctx)
	waitFor(t, "Acquire: the expired locks were not given back", func() bool { return f.released.Load() >= before+3 })

	slow.Store(1 << 30)
	l, err = lk.Acquire(ctx, "k", lockswap.WithMaxOutage(50*time.Millisecond))
	if l != nil || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Errorf("Acquire with every attempt too slow: (%v, %v), want ErrUnavailable once the outage bound passed", l, err)
	}
}

// TestCancelledDuringAttempt: the attempt's request outlives the caller's
// cancellation (it finishes within the grace); a lock it took then is
// given back, and the caller gets the context's error.
func TestCancelledDuringAttempt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stillAlive bool
	f := &fake{acquire: func(rctx context.Context, _ *driver.Claim[int]) (driver.Grant, error) {
		cancel() // the caller gives up while the request is on its way
		select {
		case <-rctx.Done():
		default:
			stillAlive = true
		}
		return driver.Grant{}, nil
	}}
	lk := newLocker(t, f, driver.Config{})
	l, err := lk.TryAcquire(ctx, "k")
	if !stillAlive {
		t.Error("the request's context ended with the caller's: the request in flight would be abandoned")
	}
	if l != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire = (%v, %v), want no lock and an error matching context.Canceled", l, err)
	}
	waitFor(t, "the lock taken for a caller who gave up was not given back", func() bool { return f.released.Load() == 1 })
}

// TestGiveBackWhileClosing: a lock an attempt took for a caller who gave
// up is given back even when the Locker was closed meanwhile (Close does
// not release held locks, but this one was never handed to anyone).
func TestGiveBackWhileClosing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var lk *driver.Locker[int]
	f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
		cancel()
		lk.Close()
		return driver.Grant{}, nil
	}}
	lk = newLocker(t, f, driver.Config{})
	if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := f.released.Load(); n != 1 {
		t.Errorf("the lock taken while Close ran was released %d times, want once", n)
	}
}

// TestWaitLongerThanTheTTL: a Waiter's wait may outlast the TTL, which
// counts from the grant: the lock is held, not given back as expired, and
// its Done stays open while the wait goes on.
func TestWaitLongerThanTheTTL(t *testing.T) {
	w := &slowWaiter{fake: &fake{}}
	lk, err := driver.New[int](w, driver.Config{Name: "waiter"})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	// A TTL a loaded machine's stalls do not eat between the grant and
	// the checks (20 ms did not always hold).
	l, err := lk.Acquire(context.Background(), "k", lockswap.WithTTL(500*time.Millisecond))
	if err != nil {
		t.Fatalf("Acquire after a wait longer than the TTL: %v", err)
	}
	if w.doneDuringWait {
		t.Error("the claim's Done closed during the wait, before the lock was granted")
	}
	if !time.Now().Before(l.Deadline()) {
		t.Errorf("Deadline %v already passed", l.Deadline())
	}
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// slowWaiter's Wait takes twice the TTL before it grants, watching the
// claim's Done meanwhile.
type slowWaiter struct {
	*fake
	doneDuringWait bool
}

func (w *slowWaiter) Wait(ctx context.Context, c *driver.Claim[int], _ *driver.Outage) (driver.Grant, error) {
	select {
	case <-c.Done():
		w.doneDuringWait = true
	case <-time.After(2 * c.TTL):
	}
	granted := time.Now() // the request that found the lock ours
	return driver.Grant{Deadline: granted.Add(c.TTL - 2*time.Millisecond)}, nil
}

// closeOnErr is a waiter's context, cancelled by the hand-over made for it,
// whose Err closes the Locker the first time it is asked once armed: Close
// runs just as the waiter looks at the lock handed to it.
type closeOnErr struct {
	context.Context
	armed atomic.Bool
	once  sync.Once
	close func()
}

func (c *closeOnErr) Err() error {
	if c.armed.Load() {
		c.once.Do(c.close)
	}
	return c.Context.Err()
}

// TestHandOverToDepartedWaiterWhileClosing: a hand-over that delivers the
// lock to a waiter that has given up, as Close runs, leaves no lock
// behind: the handed-over claim is given back (it is nobody's; Close
// releases no held lock, but this one was never held), not left on the
// server until its TTL.
func TestHandOverToDepartedWaiterWhileClosing(t *testing.T) {
	var released sync.Map // token → true
	f := newHandOverFake(&released)
	lk, err := driver.New[int](f, driver.Config{Name: "fake", Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	wctx := &closeOnErr{Context: inner, close: func() { lk.Close() }}
	var handed atomic.Value // the token handed to the waiter
	f.handOver = func(_ context.Context, held, next *driver.Claim[int]) (driver.Grant, error, func() error) {
		handed.Store(next.Token)
		cancel() // the waiter gives up while the hand-over is on its way
		wctx.armed.Store(true)
		return driver.Grant{}, nil, func() error { return nil }
	}
	held, err := lk.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		l, err := lk.Acquire(wctx, "k", lockswap.WithRetry(lockswap.ConstantRetry(time.Hour)))
		if l != nil {
			err = fmt.Errorf("got a lock (%v)", err)
		}
		done <- err
	}()
	waitQueued(t, 1)
	if err := held.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) && !errors.Is(err, lockswap.ErrClosed) {
			t.Errorf("the departed waiter's Acquire: %v, want context.Canceled or ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter's Acquire did not return within 10s")
	}
	if !lk.Closed() {
		t.Fatal("the test did not close the Locker during the hand-over")
	}
	tok, _ := handed.Load().(string)
	waitFor(t, "the lock handed to a departed waiter as Close ran was not given back", func() bool {
		_, ok := released.Load(tok)
		return ok
	})
}

// closerFunc is an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestBackgroundEndsWithClose: a driver's own background work
// (Config.Background) runs in the Locker's background group with the
// kit's: Close ends both (the driver's work sees its context cancelled,
// the kit's pending release stops), before it closes Config.Closer and
// before it returns, and refuses new work.
func TestBackgroundEndsWithClose(t *testing.T) {
	f := &fake{release: func(context.Context, *driver.Claim[int]) error { return errLostReply }}
	var (
		bg         driver.Background
		workEnded  atomic.Bool
		workErr    error
		closerRan  atomic.Bool
		endedFirst bool
	)
	lk, err := driver.New[int](f, driver.Config{Name: "fake", Uncertain: isLostReply, Background: &bg,
		Closer: closerFunc(func() error {
			closerRan.Store(true)
			endedFirst = workEnded.Load()
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	releasePending(t, lk) // the kit's work
	// The driver's work: it runs until its context ends.
	if !bg.Go(func(ctx context.Context) {
		<-ctx.Done()
		workErr = ctx.Err()
		workEnded.Store(true)
	}) {
		t.Fatal("Background.Go refused work before Close")
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if !workEnded.Load() {
		t.Fatal("Close returned while the driver's background work was still running")
	}
	if !errors.Is(workErr, context.Canceled) {
		t.Errorf("the driver's work ended with %v, want its context cancelled by Close", workErr)
	}
	if !closerRan.Load() || !endedFirst {
		t.Errorf("Closer ran: %v, after the driver's work ended: %v; want both", closerRan.Load(), endedFirst)
	}
	n := f.released.Load()
	if bg.Go(func(context.Context) { t.Error("work started after Close ran") }) {
		t.Error("Background.Go accepted work after Close")
	}
	if m := f.released.Load(); m != n {
		t.Errorf("%d releases sent after Close returned: the kit's background work outlived it", m-n)
	}
}

// TestAttemptInFlightAtClose: an attempt that takes the lock while Close
// runs gives it back (a closed Locker's lock could be neither released
// nor extended) and fails with ErrClosed, through TryAcquire and through
// the queue of Acquire.
func TestAttemptInFlightAtClose(t *testing.T) {
	for name, queue := range map[string]bool{"TryAcquire": false, "queued Acquire": true} {
		t.Run(name, func(t *testing.T) {
			var lk *driver.Locker[int]
			f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
				lk.Close()
				return driver.Grant{}, nil
			}}
			lk = newLocker(t, f, driver.Config{Queue: queue, Retry: lockswap.ConstantRetry(time.Millisecond)})
			acquire := lk.TryAcquire
			if queue {
				acquire = lk.Acquire
			}
			l, err := acquire(context.Background(), "k")
			if l != nil || !errors.Is(err, lockswap.ErrClosed) {
				t.Fatalf("got a lock: %v, err = %v; want no lock and ErrClosed", l != nil, err)
			}
			if n := f.released.Load(); n != 1 {
				t.Errorf("the lock taken while Close ran was released %d times, want once", n)
			}
		})
	}
}
