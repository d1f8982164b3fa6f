package localq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/queuetest"
)

// store is an in-memory lock service: one holder per key, like SET NX.
type store struct {
	mu      sync.Mutex
	holder  map[string]string
	expiry  map[string]time.Time // when the holder's lock expires; none: never
	ttl     time.Duration        // TTL of the locks try takes; 0: an hour
	down    bool                 // every attempt fails with ErrUnavailable
	tries   map[string][]int     // key -> caller ids of the attempts, in order
	q       *localq.Queue
	nextTok int
}

func newStore() *store {
	return &store{holder: map[string]string{}, expiry: map[string]time.Time{}, tries: map[string][]int{}, q: localq.New("test")}
}

type fakeLock struct {
	lockstate.State
	s *store
}

func (l *fakeLock) Extend(context.Context, time.Duration) error { return nil }

func (l *fakeLock) Release(context.Context) error {
	l.s.mu.Lock()
	if l.s.holder[l.Key()] == l.Token() {
		delete(l.s.holder, l.Key())
	}
	l.s.mu.Unlock()
	l.End()
	l.s.q.Released(l.Key(), l)
	return nil
}

// try is one attempt by caller id.
func (s *store) try(key string, id int) func(context.Context) (lockswap.Lock, error) {
	return func(ctx context.Context) (lockswap.Lock, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tries[key] = append(s.tries[key], id)
		if s.down {
			return nil, fmt.Errorf("test: acquire %q: %w", key, lockswap.ErrUnavailable)
		}
		if _, ok := s.holder[key]; ok {
			if exp, ok := s.expiry[key]; !ok || time.Now().Before(exp) {
				return nil, fmt.Errorf("test: acquire %q: %w", key, lockswap.ErrHeld)
			}
		}
		s.nextTok++
		tok := fmt.Sprint(s.nextTok)
		ttl := s.ttl
		if ttl == 0 {
			ttl = time.Hour
		}
		s.holder[key] = tok
		s.expiry[key] = time.Now().Add(ttl)
		l := &fakeLock{s: s}
		l.Init(key, tok, 0, false, time.Now().Add(ttl))
		return l, nil
	}
}

// hold makes key held by someone outside the queue (another process).
func (s *store) hold(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holder[key] = "other-process"
	delete(s.expiry, key)
}

func (s *store) free(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holder, key)
}

func (s *store) attempts(key string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.tries[key]...)
}

type result struct {
	id  int
	l   lockswap.Lock
	err error
}

// start runs Acquire for caller id in a goroutine and waits until it is
// queued (the line has want waiters), so that arrival order is known.
func start(t *testing.T, ctx context.Context, s *store, key string, id, want int, r lockswap.RetryStrategy, out chan<- result) {
	t.Helper()
	go func() {
		l, err := s.q.Acquire(ctx, key, r, s.try(key, id))
		out <- result{id, l, err}
	}()
	queuetest.WaitUntil(t, fmt.Sprintf("caller %d queued (%d waiting)", id, want), func() bool { return s.q.Waiting(key) == want })
}

var fast = lockswap.ConstantRetry(time.Millisecond)

// never retries by its own delay within a test: only a wake-up makes the
// next attempt.
var never = lockswap.ConstantRetry(time.Hour)

func TestFIFOOrderAndOnlyHeadPolls(t *testing.T) {
	s, ctx, key := newStore(), context.Background(), "k"
	s.hold(key)
	const n = 5
	out := make(chan result, n)
	for i := 0; i < n; i++ {
		start(t, ctx, s, key, i, i+1, fast, out)
	}
	// While another process holds the key, only the head (0) asks.
	queuetest.WaitUntil(t, "head polled several times", func() bool { return len(s.attempts(key)) >= 3 })
	for _, id := range s.attempts(key) {
		if id != 0 {
			t.Fatalf("caller %d attempted while not head of the line (attempts %v): only the head polls", id, s.attempts(key))
		}
	}
	s.free(key)
	var order []int
	for i := 0; i < n; i++ {
		r := <-out
		if r.err != nil {
			t.Fatalf("caller %d: %v", r.id, r.err)
		}
		order = append(order, r.id)
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range order {
		if id != i {
			t.Fatalf("acquisition order %v, want arrival order 0..%d", order, n-1)
		}
	}
	if k := s.q.Keys(); k != 0 {
		t.Errorf("%d lines left after every waiter left: the line of a key must be deleted when empty", k)
	}
}

// TestReleaseWakesHead: waiters whose retry delay is an hour still get the
// lock, each as soon as the previous local holder releases it.
func TestReleaseWakesHead(t *testing.T) {
	s, ctx, key := newStore(), context.Background(), "k"
	first, err := s.q.Acquire(ctx, key, never, s.try(key, 0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	out := make(chan result, n)
	for i := 1; i <= n; i++ {
		start(t, ctx, s, key, i, i, never, out)
	}
	// The head tried once (held) and now waits an hour; the others wait
	// behind it without trying.
	queuetest.WaitUntil(t, "head's first attempt", func() bool { return len(s.attempts(key)) == 2 })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		select {
		case r := <-out:
			if r.err != nil || r.id != i {
				t.Fatalf("got caller %d (%v), want caller %d", r.id, r.err, i)
			}
			r.l.Release(ctx)
		case <-time.After(10 * time.Second):
			t.Fatalf("caller %d not woken by the release of the previous local holder", i)
		}
	}
	// Callers 2..n became head when the previous one took the key and
	// tried only when it was released: one attempt each, no polling.
	if got := len(s.attempts(key)); got != 2+n {
		t.Errorf("%d attempts (%v), want %d: a hand-over is one attempt", got, s.attempts(key), 2+n)
	}
}

// TestWakeAtHolderDeadline: a head behind a local holder that never
// releases tries again at the holder's deadline, not after its own delay.
func TestWakeAtHolderDeadline(t *testing.T) {
	s, ctx, key := newStore(), context.Background(), "k"
	s.ttl = 100 * time.Millisecond // the locks try takes expire (deadline = expiry here)
	out := make(chan result, 2)
	s.hold(key)
	start(t, ctx, s, key, 0, 1, fast, out)
	start(t, ctx, s, key, 1, 2, never, out)
	s.free(key)
	r := <-out
	if r.err != nil || r.id != 0 {
		t.Fatalf("first: caller %d, %v", r.id, r.err)
	}
	// Caller 0 never releases: its lock expires after 100ms.
	select {
	case r := <-out:
		if r.err != nil || r.id != 1 {
			t.Fatalf("second: caller %d, %v", r.id, r.err)
		}
		r.l.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the head did not try at the local holder's deadline (its own delay is an hour)")
	}
}

func TestCancelledWaiterLeaves(t *testing.T) {
	s, key := newStore(), "k"
	ctx := context.Background()
	s.hold(key)
	ctxA, cancelA := context.WithCancel(ctx)
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelA()
	defer cancelB()
	outA, outB, outC := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	start(t, ctxA, s, key, 0, 1, fast, outA)
	start(t, ctxB, s, key, 1, 2, fast, outB)
	start(t, ctx, s, key, 2, 3, never, outC)

	// A waiter in the middle leaves without having tried.
	cancelB()
	r := <-outB
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, lockswap.ErrHeld) {
		t.Errorf("cancelled waiter: err = %v, want it to match context.Canceled and ErrHeld", r.err)
	}
	queuetest.WaitUntil(t, "cancelled waiter left the line", func() bool { return s.q.Waiting(key) == 2 })

	// The head leaves: caller 2 becomes head and tries at once (its own
	// delay is an hour, so without becoming head it would not).
	cancelA()
	r = <-outA
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, lockswap.ErrHeld) {
		t.Errorf("cancelled head: err = %v, want it to match context.Canceled and ErrHeld (its last attempt)", r.err)
	}
	queuetest.WaitUntil(t, "caller 2 attempted as new head", func() bool {
		a := s.attempts(key)
		return len(a) > 0 && a[len(a)-1] == 2
	})
	for _, id := range s.attempts(key) {
		if id == 1 {
			t.Errorf("the cancelled middle waiter attempted (%v)", s.attempts(key))
		}
	}
	s.free(key)
	// Caller 2's next attempt is an hour away: a release of a local lock
	// wakes it. Simulate it with a lock of this queue on the key.
	s.q.Released(key, nil)
	select {
	case r := <-outC:
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.l.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the last waiter never got the key: a cancelled waiter blocked it")
	}
	if k := s.q.Keys(); k != 0 {
		t.Errorf("%d lines left", k)
	}
}

// TestHeadGivesUp: a head whose policy is exhausted returns its last error
// (not a context error) and the next waiter becomes head and tries.
func TestHeadGivesUp(t *testing.T) {
	s, ctx, key := newStore(), context.Background(), "k"
	s.hold(key)
	outA, outB := make(chan result, 1), make(chan result, 1)
	start(t, ctx, s, key, 0, 1, lockswap.LimitedRetry(200*time.Millisecond, 3), outA)
	start(t, ctx, s, key, 1, 2, fast, outB)
	r := <-outA
	if !errors.Is(r.err, lockswap.ErrHeld) || errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("exhausted head: err = %v, want ErrHeld only", r.err)
	}
	n0 := 0
	for _, id := range s.attempts(key) {
		if id == 0 {
			n0++
		}
	}
	if n0 != 3 {
		t.Errorf("head with LimitedRetry(3) made %d attempts, want 3", n0)
	}
	queuetest.WaitUntil(t, "next head polling", func() bool {
		a := s.attempts(key)
		return a[len(a)-1] == 1
	})
	s.free(key)
	r = <-outB
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Release(ctx)
}

// TestUnavailableKeepsPolicy: an outage is retried per policy, and when the
// context ends the wait the error matches both the context and the outage.
func TestUnavailableKeepsPolicy(t *testing.T) {
	s, key := newStore(), "k"
	s.down = true
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.q.Acquire(ctx, key, fast, s.try(key, 0))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("err = %v, want DeadlineExceeded and ErrUnavailable", err)
	}
	if n := len(s.attempts(key)); n < 2 {
		t.Errorf("%d attempts during an outage, want the policy's retries", n)
	}
	if k := s.q.Keys(); k != 0 {
		t.Errorf("%d lines left", k)
	}
}

// TestNoRetryDoesNotQueue: a policy that never retries makes one attempt,
// even with others waiting (it would not wait, so it does not queue).
func TestNoRetryDoesNotQueue(t *testing.T) {
	s, ctx, key := newStore(), context.Background(), "k"
	s.hold(key)
	cctx, cancel := context.WithCancel(ctx)
	out := make(chan result, 1)
	start(t, cctx, s, key, 0, 1, fast, out)
	_, err := s.q.Acquire(ctx, key, lockswap.NoRetry(), s.try(key, 1))
	if !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("NoRetry Acquire: err = %v, want ErrHeld", err)
	}
	if w := s.q.Waiting(key); w != 1 {
		t.Errorf("%d waiting after a NoRetry Acquire, want 1", w)
	}
	cancel()
	<-out
}

func TestClose(t *testing.T) {
	s, ctx, key := newStore(), context.Background(), "k"
	s.hold(key)
	const n = 3
	out := make(chan result, n)
	for i := 0; i < n; i++ {
		start(t, ctx, s, key, i, i+1, never, out)
	}
	s.q.Close()
	for i := 0; i < n; i++ {
		select {
		case r := <-out:
			if !errors.Is(r.err, lockswap.ErrClosed) {
				t.Errorf("waiter %d after Close: err = %v, want ErrClosed", r.id, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter still waits after Close")
		}
	}
	if k := s.q.Keys(); k != 0 {
		t.Errorf("%d lines left after Close", k)
	}
	if _, err := s.q.Acquire(ctx, key, fast, s.try(key, 9)); !errors.Is(err, lockswap.ErrClosed) {
		t.Errorf("Acquire after Close: err = %v, want ErrClosed", err)
	}
}

// startOffer is start with a TTL for hand-overs: the waiter can be
// claimed.
func startOffer(t *testing.T, ctx context.Context, s *store, key string, id, want int, r lockswap.RetryStrategy, out chan<- result) {
	t.Helper()
	go func() {
		l, err := s.q.AcquireOffer(ctx, key, r, localq.Offer{TTL: time.Duration(id) * time.Second}, s.try(key, id))
		out <- result{id, l, err}
	}()
	queuetest.WaitUntil(t, fmt.Sprintf("caller %d queued (%d waiting)", id, want), func() bool { return s.q.Waiting(key) == want })
}

// claimIdle claims key's head once it has made its first attempt and waits
// between attempts.
func claimIdle(t *testing.T, s *store, key string, id int) *localq.Ticket {
	t.Helper()
	queuetest.WaitUntil(t, fmt.Sprintf("caller %d attempted", id), func() bool { return len(s.attempts(key)) > 0 })
	var tk *localq.Ticket
	queuetest.WaitUntil(t, "head claimable", func() bool {
		tk = s.q.Claim(key, nil)
		return tk != nil
	})
	if got := tk.TTL(); got != time.Duration(id)*time.Second {
		t.Fatalf("ticket TTL = %v, want caller %d's", got, id)
	}
	return tk
}

// deliverLock frees key, takes it as the releaser holding tk does for
// the claimed waiter, and delivers the lock to it.
func deliverLock(t *testing.T, s *store, key string, tk *localq.Ticket) lockswap.Lock {
	t.Helper()
	s.free(key)
	l, err := s.try(key, 99)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tk.Deliver(l, nil)
	return l
}

// TestClaimDeliversLock: a claimed waiter gets the lock delivered to it,
// without making an attempt of its own.
func TestClaimDeliversLock(t *testing.T) {
	s, key := newStore(), "k"
	s.hold(key)
	out := make(chan result, 1)
	startOffer(t, context.Background(), s, key, 1, 1, never, out)
	queuetest.WaitUntil(t, "the waiter parked after its attempt", func() bool { return s.q.Parked(key) == 1 })
	tk := claimIdle(t, s, key, 1)
	if again := s.q.Claim(key, nil); again != nil {
		t.Fatal("a claimed waiter was claimed twice")
	}
	if n := s.q.Parked(key); n != 0 {
		t.Errorf("Parked = %d with the only waiter claimed, want 0", n)
	}
	l := deliverLock(t, s, key, tk)
	r := <-out
	if r.err != nil || r.l != l {
		t.Fatalf("claimed waiter got (%v, %v), want the delivered lock", r.l, r.err)
	}
	if n := len(s.attempts(key)); n != 2 {
		t.Errorf("%d attempts, want its first one and the releaser's only", n)
	}
	if s.q.Waiting(key) != 0 {
		t.Error("the waiter is still in line")
	}
}

// TestClaimDeliversFailure: a failed attempt made for a claimed waiter
// counts as its attempt: it keeps waiting per its policy.
func TestClaimDeliversFailure(t *testing.T) {
	s, key := newStore(), "k"
	s.hold(key)
	out := make(chan result, 1)
	startOffer(t, context.Background(), s, key, 1, 1, never, out)
	tk := claimIdle(t, s, key, 1)
	tk.Deliver(nil, fmt.Errorf("test: %w", lockswap.ErrHeld))
	queuetest.WaitUntil(t, "claimable again", func() bool {
		tk = s.q.Claim(key, nil)
		return tk != nil
	})
	select {
	case r := <-out:
		t.Fatalf("waiter returned (%v, %v) after a failed hand-over; it must keep waiting", r.l, r.err)
	default:
	}
	tk.Deliver(nil, fmt.Errorf("test: %w", lockswap.ErrInvalid))
	if r := <-out; !errors.Is(r.err, lockswap.ErrInvalid) {
		t.Fatalf("err = %v, want the delivered ErrInvalid (not retryable)", r.err)
	}
}

// TestCancelWhileClaimed: a waiter cancelled while a releaser makes its
// attempt waits for the result, gives the delivered lock back, and returns
// the context's error; nothing is left held.
func TestCancelWhileClaimed(t *testing.T) {
	s, key := newStore(), "k"
	s.hold(key)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 1)
	startOffer(t, ctx, s, key, 1, 1, never, out)
	tk := claimIdle(t, s, key, 1)
	cancel()
	// Had the waiter left at once, nobody would release the lock delivered
	// below, and the last check would fail.
	deliverLock(t, s, key, tk)
	r := <-out
	if r.l != nil || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter got (%v, %v), want no lock and context.Canceled", r.l, r.err)
	}
	s.mu.Lock()
	_, held := s.holder[key]
	s.mu.Unlock()
	if held {
		t.Error("the lock handed to a cancelled waiter was not released")
	}
}

// TestClaimFallsBackToKick: a waiter without a TTL (or one busy in its
// own attempt) is not claimed; Claim wakes it like Released.
func TestClaimFallsBackToKick(t *testing.T) {
	s, key := newStore(), "k"
	s.hold(key)
	out := make(chan result, 1)
	start(t, context.Background(), s, key, 1, 1, never, out) // no TTL: not claimable
	queuetest.WaitUntil(t, "first attempt", func() bool { return len(s.attempts(key)) == 1 })
	s.free(key)
	if tk := s.q.Claim(key, nil); tk != nil {
		t.Fatal("a waiter without a TTL was claimed")
	}
	if r := <-out; r.err != nil {
		t.Fatalf("kicked waiter: %v", r.err)
	}
}

// TestClaimByRespectsWaiterDeadline: a releaser whose hand-over request may
// run past a waiter's deadline (plus the grace) does not claim it, since a
// claimed waiter waits for that request whatever its context does; one
// whose request ends in time does.
func TestClaimByRespectsWaiterDeadline(t *testing.T) {
	s, key := newStore(), "k"
	s.hold(key)
	out := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	startOffer(t, ctx, s, key, 1, 1, never, out)
	queuetest.WaitUntil(t, "caller 1 attempted", func() bool { return len(s.attempts(key)) > 0 })
	d, _ := ctx.Deadline()
	if tk := s.q.ClaimBy(key, nil, d.Add(time.Minute)); tk != nil {
		t.Fatal("claimed a waiter whose deadline comes a minute before the hand-over's bound")
	}
	var tk *localq.Ticket
	queuetest.WaitUntil(t, "head claimable by a request that ends in time", func() bool {
		tk = s.q.ClaimBy(key, nil, d.Add(-time.Second))
		return tk != nil
	})
	tk.Deliver(nil, errors.New("held"))
	cancel()
	<-out
}

// TestCloseWhileClaimed: a waiter whose Queue closes while a releaser
// makes its attempt waits for the result and gives the delivered lock
// back through Offer.GiveBack (the Locker's Release of it would refuse
// once closed), then returns ErrClosed.
func TestCloseWhileClaimed(t *testing.T) {
	s, key := newStore(), "k"
	s.hold(key)
	gaveBack := make(chan lockswap.Lock, 1)
	out := make(chan result, 1)
	go func() {
		offer := localq.Offer{TTL: time.Second, GiveBack: func(_ context.Context, l lockswap.Lock) { gaveBack <- l }}
		l, err := s.q.AcquireOffer(context.Background(), key, never, offer, s.try(key, 1))
		out <- result{1, l, err}
	}()
	tk := claimIdle(t, s, key, 1)
	s.q.Close()
	l := deliverLock(t, s, key, tk)
	r := <-out
	if r.l != nil || !errors.Is(r.err, lockswap.ErrClosed) {
		t.Fatalf("waiter of a closed Queue got (%v, %v), want no lock and ErrClosed", r.l, r.err)
	}
	select {
	case got := <-gaveBack:
		if got != l {
			t.Errorf("GiveBack got %v, want the delivered lock", got)
		}
	default:
		t.Error("the lock delivered to a waiter of a closed Queue was not given back")
	}
}

// TestWaiterBehindOutage: a caller that waits behind the head while every
// attempt fails with an outage ends with the outage as its cause, not
// with contention: nobody holds the key.
func TestWaiterBehindOutage(t *testing.T) {
	s, key := newStore(), "k"
	s.down = true
	headCtx, stopHead := context.WithCancel(context.Background())
	defer stopHead()
	out := make(chan result, 2)
	start(t, headCtx, s, key, 0, 1, fast, out)
	queuetest.WaitUntil(t, "the head's first failed attempt", func() bool { return len(s.attempts(key)) >= 1 })
	ctx, cancel := context.WithCancel(context.Background())
	start(t, ctx, s, key, 1, 2, fast, out)
	cancel()
	r := <-out
	if r.id != 1 {
		t.Fatalf("caller %d ended first, want the cancelled waiter 1", r.id)
	}
	if !errors.Is(r.err, lockswap.ErrUnavailable) || errors.Is(r.err, lockswap.ErrHeld) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("waiter behind an outage: err = %v, want ErrUnavailable and context.Canceled, not ErrHeld", r.err)
	}
	stopHead()
	if r := <-out; !errors.Is(r.err, lockswap.ErrUnavailable) {
		t.Fatalf("head: err = %v, want ErrUnavailable", r.err)
	}
	for _, id := range s.attempts(key) {
		if id != 0 {
			t.Fatalf("attempts %v: the waiter behind the head attempted", s.attempts(key))
		}
	}
}
