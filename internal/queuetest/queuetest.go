// Package queuetest checks, against real servers, the local wait queue that
// the polling backends (singleredis, redlock, legacysetnx) put in front of
// Acquire: goroutines of one Locker that wait for a key get it in arrival
// order, a release through the Locker wakes the next waiter at once,
// goroutines cycling on one key share it fairly, and Close ends the waits;
// waiters for permits get them in arrival order too. It is used by those
// packages' tests.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// Subject is one backend under test.
type Subject struct {
	// NewLocker returns a fresh Locker on the test's servers, closed by the
	// test's cleanup.
	NewLocker func(t *testing.T) lockswap.Locker
	// Waiting reports how many Acquire calls of lk wait for key.
	Waiting func(lk lockswap.Locker, key string) int
}

type acquired struct {
	id  int
	l   lockswap.Lock
	err error
}

// WaitUntil polls cond every millisecond, for at most 10 s: it waits for a
// condition, not for a duration.
func WaitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

const ttl = 10 * time.Second

// FIFO: callers of one Locker that wait for a key held by another Locker
// get it in arrival order. Only the first polls (every 2 ms); the others
// would wait an hour between attempts, so each of them gets the key only
// because the release before it, through the same Locker, woke it.
func FIFO(t *testing.T, s Subject) {
	ctx, key := context.Background(), "fifo"
	other, lk := s.NewLocker(t), s.NewLocker(t)
	held, err := other.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	out := make(chan acquired, n)
	for i := 0; i < n; i++ {
		retry := lockswap.ConstantRetry(time.Hour)
		if i == 0 {
			retry = lockswap.ConstantRetry(2 * time.Millisecond)
		}
		go func() {
			l, err := lk.Acquire(ctx, key, lockswap.WithTTL(ttl), lockswap.WithRetry(retry))
			out <- acquired{i, l, err}
		}()
		WaitUntil(t, fmt.Sprintf("caller %d queued", i), func() bool { return s.Waiting(lk, key) == i+1 })
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		var r acquired
		select {
		case r = <-out:
		case <-time.After(10 * time.Second):
			t.Fatalf("acquisition %d: no waiter got the key (a release through the Locker must wake the next one)", i)
		}
		if r.err != nil {
			t.Fatalf("caller %d: %v", r.id, r.err)
		}
		if r.id != i {
			t.Fatalf("acquisition %d went to caller %d, want %d: local waiters must get the key in arrival order", i, r.id, i)
		}
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w := s.Waiting(lk, key); w != 0 {
		t.Errorf("%d callers still queued after every waiter left", w)
	}
}

// PermitFIFO: callers of one Locker that wait for permits of a key get
// them in arrival order, and a caller behind one that just took a permit
// tries at once (the key may have room for it too) instead of after its
// retry delay. Limit 2: another Locker holds one permit and lk the other;
// the callers would wait an hour between attempts. The other Locker's
// release wakes nobody; lk's release then wakes the first caller, which
// takes a permit, and the second takes the other only because it tried
// as the first took one. The third and fourth get theirs only because a
// release through lk woke them.
func PermitFIFO(t *testing.T, s Subject) {
	ctx, key := context.Background(), "permit-fifo"
	other, lk := s.NewLocker(t), s.NewLocker(t)
	permits := lockswap.WithPermits(2)
	theirs, err := other.TryAcquire(ctx, key, lockswap.WithTTL(ttl), permits)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl), permits)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	out := make(chan acquired, n)
	for i := 0; i < n; i++ {
		go func() {
			// A minute: a caller behind a holder of the line waits no
			// longer than its Deadline, and the check is that the
			// second caller does not wait for anything.
			l, err := lk.Acquire(ctx, key, lockswap.WithTTL(time.Minute), lockswap.WithRetry(lockswap.ConstantRetry(time.Hour)), permits)
			out <- acquired{i, l, err}
		}()
		WaitUntil(t, fmt.Sprintf("caller %d queued", i), func() bool { return s.Waiting(lk, key) == i+1 })
	}
	if err := theirs.Release(ctx); err != nil {
		t.Fatal(err)
	}
	byID := map[int]lockswap.Lock{}
	defer func() {
		for _, l := range byID {
			_ = l.Release(ctx)
		}
	}()
	receive := func(what string) acquired {
		t.Helper()
		select {
		case r := <-out:
			if r.err != nil {
				t.Fatalf("caller %d: %v", r.id, r.err)
			}
			byID[r.id] = r.l
			return r
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
		return acquired{}
	}
	// The first two callers take both permits: the first woken by the
	// release, the second as the first took one. Both take theirs at
	// about the same time, so they may report in either order.
	if err := ours.Release(ctx); err != nil {
		t.Fatal(err)
	}
	receive("no waiter got a permit 10 s after a release through the Locker")
	receive("the second caller did not take the permit free beside the first caller's: a caller behind one that took a permit must try at once")
	if byID[0] == nil || byID[1] == nil {
		t.Fatalf("the first two permits went to callers %v, want 0 and 1: local waiters must get permits in arrival order", keys(byID))
	}
	// Then one at a time, as we release them.
	for i := 2; i < n; i++ {
		if err := byID[i-2].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := receive(fmt.Sprintf("caller %d: no permit 10 s after a release through the Locker", i)); r.id != i {
			t.Fatalf("permit %d went to caller %d, want %d: local waiters must get permits in arrival order", i, r.id, i)
		}
	}
	if w := s.Waiting(lk, key); w != 0 {
		t.Errorf("%d callers still queued after every waiter left", w)
	}
}

func keys(m map[int]lockswap.Lock) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// CloseEndsWaits: Close makes every Acquire waiting in the line return an
// error matching lockswap.ErrClosed, and leaves no line behind.
func CloseEndsWaits(t *testing.T, s Subject) {
	ctx, key := context.Background(), "close"
	other, lk := s.NewLocker(t), s.NewLocker(t)
	held, err := other.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	const n = 3
	out := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := lk.Acquire(ctx, key, lockswap.WithTTL(ttl), lockswap.WithRetry(lockswap.ConstantRetry(time.Hour)))
			out <- err
		}()
		WaitUntil(t, fmt.Sprintf("caller %d queued", i), func() bool { return s.Waiting(lk, key) == i+1 })
	}
	lk.Close()
	for i := 0; i < n; i++ {
		select {
		case err := <-out:
			if !errors.Is(err, lockswap.ErrClosed) {
				t.Errorf("waiting Acquire after Close: err = %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting Acquire did not end at Close")
		}
	}
	if w := s.Waiting(lk, key); w != 0 {
		t.Errorf("%d callers still queued after Close", w)
	}
}

// Fairness: 8 goroutines cycling on one key through one Locker (the
// contended scenario of the benchmarks) take it in turn, with no two
// holders at once. The check is on hand-overs, not on totals: a goroutine
// that releases while others wait must not take the key straight back
// (barging), so the holder after a release is the releaser itself in at
// most a quarter of the hand-overs. With the queue that happens only when
// no other goroutine is back in line yet; without it the releaser, whose
// next request reaches the server one round trip after its release while
// the others sleep out their retry delay, wins most of them. Totals per
// goroutine are logged: on a loaded machine a goroutine that is not
// scheduled for a while misses its turns (the line does not wait for it),
// which says nothing about the queue. The goroutines queue behind a first
// holder before counting starts.
func Fairness(t *testing.T, s Subject) {
	ctx, key := context.Background(), "fair"
	lk := s.NewLocker(t)
	first, err := lk.Acquire(ctx, key, lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, total = 8, 160
	var (
		taken, holders, repeats atomic.Int64
		last                    atomic.Int64 // the previous holder + 1
		counts                  [goroutines]int
		wg                      sync.WaitGroup
	)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := lk.Acquire(ctx, key, lockswap.WithTTL(ttl))
				if err != nil {
					t.Error(err)
					return
				}
				if holders.Add(1) != 1 {
					t.Error("two holders at once")
				}
				more := taken.Add(1) <= total
				if more {
					counts[g]++
					if last.Load() == int64(g)+1 {
						repeats.Add(1)
					}
				}
				last.Store(int64(g) + 1)
				holders.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
				if !more {
					return
				}
			}
		}()
	}
	WaitUntil(t, "all goroutines queued", func() bool { return s.Waiting(lk, key) == goroutines })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("acquisitions per goroutine %v; the releaser took the key straight back %d times of %d", counts, repeats.Load(), total)
	if r := repeats.Load(); r > total/4 {
		t.Errorf("the goroutine that released took the key straight back in %d of %d hand-overs while others waited, want at most %d: waiters must be served in arrival order", r, total, total/4)
	}
}

// CountingRetry waits Delay between attempts and counts how often it was
// asked (NextDelay).
type CountingRetry struct {
	Delay time.Duration
	calls atomic.Int32
}

// NextDelay returns Delay and counts the call.
func (r *CountingRetry) NextDelay(int) (time.Duration, bool) {
	r.calls.Add(1)
	return r.Delay, true
}

// Calls returns how many times NextDelay was called.
func (r *CountingRetry) Calls() int { return int(r.calls.Load()) }

// Result is what an Acquire returned.
type Result struct {
	Lock lockswap.Lock
	Err  error
}

// QueueBehind starts lk.Acquire(ctx, key) with ttl and a retry delay of an
// hour (only a release through lk can serve it) and returns once the
// waiter's first attempt found the key held and it waits between attempts.
// The queue asks the policy's NextDelay once before it queues (does it
// retry at all?) and again after that failed attempt; a Locker of the kit
// (with a Parked method) also reports the waiter parked, so that a release
// through it can claim the waiter (right after NextDelay returns it still
// cannot).
func QueueBehind(t *testing.T, ctx context.Context, lk lockswap.Locker, key string, ttl time.Duration) <-chan Result {
	t.Helper()
	out := make(chan Result, 1)
	r := &CountingRetry{Delay: time.Hour}
	go func() {
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(ttl), lockswap.WithRetry(r))
		out <- Result{l, err}
	}()
	WaitUntil(t, "the waiter's first attempt failed", func() bool { return r.Calls() >= 2 })
	if p, ok := lk.(interface{ Parked(key string) int }); ok {
		WaitUntil(t, "the waiter is parked between attempts", func() bool { return p.Parked(key) >= 1 })
	}
	return out
}

// StaleReleaseWithWaiter: a holder whose lock expired and was taken by
// another client releases it while a goroutine of the same Locker waits
// for the key. The release reports ErrLost, check sees the store (the
// other client's lock must be intact), and the waiter keeps waiting until
// it is cancelled; the other client's lock then releases normally. short
// is the expiring lock's TTL.
func StaleReleaseWithWaiter(t *testing.T, s Subject, short time.Duration, check func(t *testing.T, key string, theirs lockswap.Lock)) {
	ctx, key := context.Background(), "stale-release"
	lk, other := s.NewLocker(t), s.NewLocker(t)
	held, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(short))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := QueueBehind(t, wctx, lk, key, ttl)
	var theirs lockswap.Lock
	WaitUntil(t, "the other client took the expired key", func() bool {
		theirs, err = other.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
		return err == nil
	})
	if err := held.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("release of a lost lock with a waiter: %v, want ErrLost", err)
	}
	check(t, key, theirs)
	select {
	case r := <-out:
		t.Fatalf("waiter returned (%v, %v) while the key is held by the other client", r.Lock, r.Err)
	default:
	}
	if w := s.Waiting(lk, key); w != 1 {
		t.Fatalf("%d waiting, want the waiter still in line", w)
	}
	cancel()
	if r := <-out; !errors.Is(r.Err, context.Canceled) || !errors.Is(r.Err, lockswap.ErrHeld) {
		t.Errorf("cancelled waiter: %v, want context.Canceled and ErrHeld", r.Err)
	}
	if err := theirs.Release(ctx); err != nil {
		t.Errorf("the other client's lock after the stale release: %v", err)
	}
}
