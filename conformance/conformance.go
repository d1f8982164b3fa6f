// Package conformance is the test suite every lockswap backend passes.
//
// A backend hooks in with a [Harness] that makes independent Lockers over
// one shared store (each with its own connections: two Lockers are two
// clients, never one object playing both sides) and says which fault
// controls it offers. [Run] then checks the rules every Locker must keep;
// each failure message says which rule was broken, for the implementer.
//
//	func TestConformance(t *testing.T) {
//		mr := miniredis.RunT(t)
//		conformance.Run(t, conformance.Harness{
//			NewLocker:   func(t *testing.T) lockswap.Locker { ... },
//			TTL:         500 * time.Millisecond,
//			AdvanceTime: mr.FastForward,
//		})
//	}
package conformance

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
	"github.com/lockswap/lockswap/fenced"
)

// Harness connects a backend to the suite.
type Harness struct {
	// NewLocker returns a new Locker with its own connections to the shared
	// store. The suite closes it.
	NewLocker func(t *testing.T) lockswap.Locker
	// TTL is the lock TTL for cases that wait for expiry. On real servers
	// keep it short (a few hundred ms; etcd: the smallest it honours).
	TTL time.Duration
	// AdvanceTime, when set, moves the store's clock forward (miniredis
	// FastForward), so expiry needs no real waiting.
	AdvanceTime func(d time.Duration)
	// Expire, when set, makes a held lock expire on the server as if its
	// holder had crashed or paused: for a backend that keeps locks alive in
	// the background (etcd leases), it stops that. The suite then waits
	// until another Locker can take the key. When nil, the suite advances
	// time or waits for the TTL.
	Expire func(t *testing.T, holder lockswap.Locker, l lockswap.Lock)
	// Goroutines lists package path prefixes whose goroutines must not
	// outlive Close, beside lockswap's own.
	Goroutines []string
	// NewLockerTTL, when set, returns a new Locker whose own default TTL
	// (its Options.TTL) is ttl, or the error its constructor gives for it.
	// The DefaultTTL case then checks that a call without
	// lockswap.WithTTL takes that TTL, that WithTTL wins, and that a
	// default outside the backend's range is refused with ErrInvalid.
	NewLockerTTL func(t *testing.T, ttl time.Duration) (lockswap.Locker, error)
}

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewLocker == nil || h.TTL <= 0 {
		t.Fatal("conformance: Harness needs NewLocker and a positive TTL")
	}
	s := &suite{h: h}
	cases := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"MutualExclusion", s.mutualExclusion},
		{"TryAcquireHeld", s.tryAcquireHeld},
		{"ExpiredHolderCannotReleaseOrExtend", s.expiredHolder},
		{"VanishedHolderFreedAfterTTL", s.vanishedHolder},
		{"ExtendKeepsLock", s.extendKeepsLock},
		{"TTLReported", s.ttlReported},
		{"DefaultTTL", s.defaultTTL},
		{"ReleaseIdempotent", s.releaseIdempotent},
		{"ReleaseWithCancelledContext", s.releaseCancelled},
		{"CancelWaitingAcquire", s.cancelWaiting},
		{"WaitLongerThanTTL", s.waitLongerThanTTL},
		{"TokensUnique", s.tokensUnique},
		{"DeadlineWithinTTL", s.deadlineWithinTTL},
		{"DoneByDeadline", s.doneByDeadline},
		{"Fencing", s.fencing},
		{"BadArguments", s.badArguments},
		{"OddKeys", s.oddKeys},
		{"AfterClose", s.afterClose},
		{"Close", s.closeLocker},
		{"CloseEndsWaiters", s.closeEndsWaiters},
		{"Do", s.do},
	}
	for _, c := range cases {
		t.Run(c.name, c.fn)
	}
}

type suite struct {
	h   Harness
	seq int
	mu  sync.Mutex
}

func (s *suite) locker(t *testing.T) lockswap.Locker {
	t.Helper()
	l := s.h.NewLocker(t)
	if l == nil {
		t.Fatal("conformance: NewLocker returned nil")
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// key returns a key no other case uses.
func (s *suite) key(t *testing.T) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("conformance-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano(), s.seq)
}

// take is a TryAcquire of key on lk that the case needs: a failure ends
// the case with the message failed, whose %v is the error.
func take(t *testing.T, ctx context.Context, lk lockswap.Locker, key, failed string, opts ...lockswap.Option) lockswap.Lock {
	t.Helper()
	l, err := lk.TryAcquire(ctx, key, opts...)
	if err != nil {
		t.Fatalf(failed, err)
	}
	return l
}

// release is a Release of l that the case needs to succeed.
func release(t *testing.T, ctx context.Context, l lockswap.Lock) {
	t.Helper()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) ttl() lockswap.Option { return lockswap.WithTTL(s.h.TTL) }

// warmUp has lk take and release a lock on a key of its own, so that its
// connections (and an etcd lease, a fair wait's subscription) are up
// before a step that must fit in one short TTL: a first dial on a loaded
// machine can take longer than that.
func warmUp(ctx context.Context, lk lockswap.Locker, key string) {
	if l, err := lk.Acquire(ctx, key+"-warm-up", lockswap.WithTTL(10*time.Second)); err == nil {
		l.Release(ctx)
	}
}

// eventually polls cond until it is true or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expire makes l expire on the server and waits until other can take key,
// returning other's lock, taken for 10 s: what the cases check of it must
// not depend on a loaded machine doing the next steps within one short
// TTL.
func (s *suite) expireAndTake(t *testing.T, holder lockswap.Locker, l lockswap.Lock, other lockswap.Locker) lockswap.Lock {
	t.Helper()
	ctx := ctxT(t)
	if s.h.Expire != nil {
		s.h.Expire(t, holder, l)
	} else if s.h.AdvanceTime != nil {
		s.h.AdvanceTime(s.h.TTL + time.Millisecond)
	}
	var got lockswap.Lock
	eventually(t, s.h.TTL*3+10*time.Second, "a lock whose holder stopped renewing was never freed: keys must expire after their TTL", func() bool {
		nl, err := other.TryAcquire(ctx, l.Key(), lockswap.WithTTL(10*time.Second))
		if err == nil {
			got = nl
			return true
		}
		if !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("TryAcquire while waiting for expiry: %v (want success or ErrHeld)", err)
		}
		return false
	})
	return got
}

func (s *suite) mutualExclusion(t *testing.T) {
	const lockers, perLocker, rounds = 3, 3, 8
	key := s.key(t)
	ctx := ctxT(t)
	var res fenced.Resource
	var wg sync.WaitGroup
	errs := make(chan error, lockers*perLocker)
	for i := 0; i < lockers; i++ {
		lk := s.locker(t)
		for g := 0; g < perLocker; g++ {
			wg.Add(1)
			go func(holder string) {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second),
						lockswap.WithRetry(lockswap.JitterRetry(time.Millisecond, 5*time.Millisecond)))
					if err != nil {
						errs <- fmt.Errorf("%s: Acquire: %w", holder, err)
						return
					}
					res.Enter(holder)
					runtime.Gosched()
					time.Sleep(100 * time.Microsecond) // hold the lock for a moment of real work
					res.Exit()
					if err := l.Release(ctx); err != nil {
						errs <- fmt.Errorf("%s: Release: %w", holder, err)
						return
					}
				}
			}(fmt.Sprintf("locker%d/g%d", i, g))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := res.Stats()
	if st.Overlaps != 0 {
		t.Errorf("mutual exclusion broken: %d of %d critical sections overlapped another holder (max %d inside at once)", st.Overlaps, st.Entries, st.MaxConcurrent)
	}
	if want := lockers * perLocker * rounds; st.Entries != want && !t.Failed() {
		t.Errorf("%d critical sections entered, want %d", st.Entries, want)
	}
}

func (s *suite) tryAcquireHeld(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	la := take(t, ctx, a, key, "TryAcquire on a free key: %v", lockswap.WithTTL(10*time.Second))
	_, err := b.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
	if !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire on a key another Locker holds: err = %v; contention must match ErrHeld", err)
	}
	if errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("contention error also matches ErrUnavailable: %v; callers must be able to tell contention from an outage", err)
	}
	if !strings.Contains(err.Error(), key) {
		t.Errorf("contention error %q does not name the key %q", err, key)
	}
	release(t, ctx, la)
	lb := take(t, ctx, b, key, "TryAcquire after the holder released: %v; Release must free the key", lockswap.WithTTL(10*time.Second))
	lb.Release(ctx)
}

func (s *suite) expiredHolder(t *testing.T) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	la := take(t, ctx, a, key, "TryAcquire: %v", s.ttl())
	lb := s.expireAndTake(t, a, la, b)
	if err := la.Extend(ctx, s.h.TTL); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Extend by a holder whose lock expired and was taken: err = %v, want ErrLost", err)
	}
	if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Release by a holder whose lock expired and was taken: err = %v, want ErrLost", err)
	}
	select {
	case <-la.Done():
	default:
		t.Error("Done of a lock known to be lost is still open")
	}
	if _, err := c.TryAcquire(ctx, key, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("after the former holder's Extend/Release, a third Locker got err = %v, want ErrHeld: a stale holder disturbed the new holder's lock", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Errorf("new holder's Release: %v", err)
	}
}

func (s *suite) vanishedHolder(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	warmUp(ctx, b, key)
	la := take(t, ctx, a, key, "TryAcquire: %v", s.ttl())
	if _, err := b.TryAcquire(ctx, key, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("key taken while its holder was alive: err = %v", err)
	}
	lb := s.expireAndTake(t, a, la, b)
	if lb.Token() == la.Token() {
		t.Error("the new holder has the vanished holder's token")
	}
	lb.Release(ctx)
}

func (s *suite) extendKeepsLock(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx := ctxT(t)
	warmUp(ctx, b, s.key(t))
	ttl := s.h.TTL
	var (
		la    lockswap.Lock
		key   string
		first time.Time
	)
	// Extend twice, each time before the validity runs out, so that in all
	// the lock is held for more than its original TTL. A process the
	// scheduler kept from running past the lock's Deadline could not
	// extend in time (less than a fifth of the TTL left, where 40% was
	// asked for): that is not the backend's doing, so the case starts over
	// with a new key (a few times at most).
	for try := 1; ; try++ {
		key = s.key(t)
		la = take(t, ctx, a, key, "TryAcquire: %v", s.ttl())
		first = la.Deadline()
		late := false
		for i := 0; i < 2 && !late; i++ {
			if s.h.AdvanceTime != nil {
				s.h.AdvanceTime(ttl * 6 / 10)
			} else {
				time.Sleep(ttl * 6 / 10) // real servers: the passage of time is the condition under test
			}
			if left := time.Until(la.Deadline()); s.h.AdvanceTime == nil && left < ttl/5 && try < 3 {
				t.Logf("woke up with %v of the lock's validity left, not the 40%% asked for (a busy machine): starting over", left.Round(time.Millisecond))
				late = true
				la.Release(ctx)
				break
			}
			// The second extension is long: the checks after it must
			// not depend on a loaded machine making them within one TTL.
			ext := ttl
			if i == 1 {
				ext = 10 * time.Second
			}
			if err := la.Extend(ctx, ext); err != nil {
				t.Fatalf("Extend #%d within validity: %v", i+1, err)
			}
		}
		if !late {
			break
		}
	}
	if !la.Deadline().After(first) {
		t.Errorf("Deadline %v did not move past the original %v after Extend", la.Deadline(), first)
	}
	select {
	case <-la.Done():
		t.Fatal("Done closed although the lock was extended in time")
	default:
	}
	if _, err := b.TryAcquire(ctx, key, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("after 1.2×TTL with extensions another Locker got err = %v, want ErrHeld: Extend must keep the lock", err)
	}
	release(t, ctx, la)
}

// ttlReported: Lock.TTL is the TTL the lock was taken with (WithTTL, or
// the Locker's default) and, after Extend, the TTL of the extension: what
// lockswap.Do renews by.
func (s *suite) ttlReported(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	l := take(t, ctx, lk, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	if got := l.TTL(); got != 10*time.Second {
		t.Errorf("TTL() = %v after TryAcquire with WithTTL(10s)", got)
	}
	if err := l.Extend(ctx, 12*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if got := l.TTL(); got != 12*time.Second {
		t.Errorf("TTL() = %v after Extend(12s)", got)
	}
	release(t, ctx, l)
	l = take(t, ctx, lk, key, "TryAcquire without WithTTL: %v")
	defer l.Release(ctx)
	want := lockswap.DefaultTTL
	if d, ok := lk.(interface{ DefaultTTL() time.Duration }); ok {
		want = d.DefaultTTL()
	}
	if got := l.TTL(); got != want {
		t.Errorf("TTL() = %v after TryAcquire without WithTTL, want the Locker's default %v", got, want)
	}
}

// defaultTTL: a Locker's own default TTL (Harness.NewLockerTTL) is the TTL
// of Acquire and TryAcquire without WithTTL; WithTTL wins; a default out
// of range is refused.
func (s *suite) defaultTTL(t *testing.T) {
	if s.h.NewLockerTTL == nil {
		t.Skip("Harness.NewLockerTTL is not set: the backend has no default TTL of its own")
	}
	const def = 3 * time.Second
	lk, err := s.h.NewLockerTTL(t, def)
	if err != nil {
		t.Fatalf("a Locker with the default TTL %v: %v", def, err)
	}
	defer lk.Close()
	if d, ok := lk.(interface{ DefaultTTL() time.Duration }); ok && d.DefaultTTL() != def {
		t.Errorf("DefaultTTL() = %v, want %v", d.DefaultTTL(), def)
	}
	ctx, key := ctxT(t), s.key(t)
	for _, c := range []struct {
		opts []lockswap.Option
		want time.Duration
	}{{nil, def}, {[]lockswap.Option{lockswap.WithTTL(20 * time.Second)}, 20 * time.Second}} {
		for _, call := range []struct {
			name string
			fn   func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error)
		}{{"Acquire", lk.Acquire}, {"TryAcquire", lk.TryAcquire}} {
			start := time.Now()
			l, err := call.fn(ctx, key, c.opts...)
			if err != nil {
				t.Fatalf("%s with %d options: %v", call.name, len(c.opts), err)
			}
			if l.TTL() != c.want {
				t.Errorf("%s with %d options: TTL() = %v, want %v", call.name, len(c.opts), l.TTL(), c.want)
			}
			if d := l.Deadline(); !d.After(start) || d.After(time.Now().Add(c.want)) {
				t.Errorf("%s with %d options: deadline %v after the call began, want within its TTL %v", call.name, len(c.opts), d.Sub(start), c.want)
			}
			release(t, ctx, l)
		}
	}
	for _, bad := range []time.Duration{time.Nanosecond, lockswap.MaxTTL + time.Hour} {
		lk, err := s.h.NewLockerTTL(t, bad)
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("a Locker with the default TTL %v: err = %v, want ErrInvalid", bad, err)
		}
		if lk != nil {
			lk.Close()
		}
	}
}

func (s *suite) releaseIdempotent(t *testing.T) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	la := take(t, ctx, a, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	release(t, ctx, la)
	select {
	case <-la.Done():
	default:
		t.Error("Done still open after Release")
	}
	lb := take(t, ctx, b, key, "TryAcquire after Release: %v", lockswap.WithTTL(10*time.Second))
	if err := la.Release(ctx); err != nil && !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("second Release: %v, want nil or ErrLost", err)
	}
	if _, err := c.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("a second Release by the former holder freed the new holder's lock (third Locker got %v)", err)
	}
	if err := la.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Extend after Release: err = %v, want ErrLost", err)
	}
	lb.Release(ctx)
}

func (s *suite) releaseCancelled(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	l := take(t, ctx, a, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Release(cancelled); err != nil {
		t.Fatalf("Release with an already cancelled context: %v; cleanup must still run, bounded by its own timeout", err)
	}
	lb := take(t, ctx, b, key, "after Release with a cancelled context the key is still held (%v): the release was skipped", lockswap.WithTTL(10*time.Second))
	lb.Release(ctx)
}

func (s *suite) cancelWaiting(t *testing.T) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	// The waiter's Locker takes a lock once first, with Acquire, so that
	// its wait below is for the holder and not for its own setup (an etcd
	// lease, the fair wait's subscription: a cancel during it is no wait
	// for a holder, and rightly not ErrHeld).
	warmUp(ctx, b, key)
	la := take(t, ctx, a, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	retry := &countingRetry{delay: 5 * time.Millisecond}
	go func() {
		_, err := b.Acquire(wctx, key, lockswap.WithTTL(10*time.Second), lockswap.WithRetry(retry))
		done <- err
	}()
	waitSettled(t, "cancelWaiting")
	// A backend that polls has been answered once it asks its retry
	// policy for the second delay: a cancel then cuts the attempt after
	// one that found the key held, whose error stays the cause. (One that
	// waits for a wake-up, as etcd and a fair wait do, asks none: for it
	// the settled wait above is all there is to see.)
	for end := time.Now().Add(5 * time.Second); b.Guarantees().Wait == lockswap.WaitPoll && retry.calls.Load() < 2 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Acquire: err = %v, want it to match context.Canceled", err)
		}
		if !errors.Is(err, lockswap.ErrHeld) {
			t.Errorf("cancelled Acquire: err = %v, want it to match ErrHeld too (the cause of the wait)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return within 5s of its context being cancelled")
	}
	release(t, ctx, la)
	lc := take(t, ctx, c, key, "after the holder released, the key is still taken (%v): the cancelled waiter left something behind", lockswap.WithTTL(10*time.Second))
	lc.Release(ctx)
}

// countingRetry waits delay between attempts and counts the delays asked.
type countingRetry struct {
	delay time.Duration
	calls atomic.Int64
}

func (r *countingRetry) NextDelay(int) (time.Duration, bool) {
	r.calls.Add(1)
	return r.delay, true
}

// waitLongerThanTTL: an Acquire that waited longer than its own TTL for
// the holder gets a lock valid from when it got it (the TTL counts from
// the grant, not from the start of the wait).
func (s *suite) waitLongerThanTTL(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	if lw, err := b.TryAcquire(ctx, key+"-warm-up", lockswap.WithTTL(10*time.Second)); err == nil {
		lw.Release(ctx)
	}
	la := take(t, ctx, a, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	type result struct {
		l   lockswap.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, key, s.ttl(), lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
		got <- result{l, err}
	}()
	waitBlocked(t, 1, "waitLongerThanTTL")
	time.Sleep(s.h.TTL * 3 / 2) // real time: the wait must outlast the waiter's TTL
	release(t, ctx, la)
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("Acquire that waited %v for a holder, with a TTL of %v: %v; the TTL counts from the grant", s.h.TTL*3/2, s.h.TTL, r.err)
		}
		if !time.Now().Before(r.l.Deadline()) {
			t.Errorf("the lock's Deadline %v had passed on return", r.l.Deadline())
		}
		r.l.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter got nothing within 10s of the release")
	}
}

func (s *suite) tokensUnique(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		lk := a
		if i%2 == 1 {
			lk = b
		}
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second), lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
		if err != nil {
			t.Fatalf("Acquire #%d: %v", i, err)
		}
		tok := l.Token()
		if len(tok) < 16 {
			t.Errorf("token %q is shorter than 16 characters: tokens need at least 128 random bits", tok)
		}
		if seen[tok] {
			t.Errorf("token %q handed out twice", tok)
		}
		seen[tok] = true
		if l.Key() != key {
			t.Errorf("Key() = %q, want %q", l.Key(), key)
		}
		release(t, ctx, l)
	}
}

func (s *suite) deadlineWithinTTL(t *testing.T) {
	a := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	ttl := 10 * time.Second
	start := time.Now()
	l := take(t, ctx, a, key, "TryAcquire: %v", lockswap.WithTTL(ttl))
	defer l.Release(ctx)
	end := time.Now()
	// The deadline counts from before the first request (start + validity -
	// drift): it can be no later than start + TTL.
	if d := l.Deadline(); d.After(start.Add(ttl)) {
		t.Errorf("Deadline %v is later than the time before the call + TTL %v: exclusion cannot be promised past the TTL counted from before the request", d, start.Add(ttl))
	} else if !d.After(end) {
		t.Errorf("Deadline %v already passed on return (end %v) with a 10s TTL", d, end)
	}
}

func (s *suite) doneByDeadline(t *testing.T) {
	a := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	l := take(t, ctx, a, key, "TryAcquire: %v", s.ttl())
	defer l.Release(ctx)
	select {
	case <-l.Done():
	case <-time.After(time.Until(l.Deadline()) + time.Second):
		t.Fatalf("Done not closed 1s after the Deadline of a lock that was never extended")
	}
	if now := time.Now(); now.Before(l.Deadline().Add(-s.h.TTL)) {
		t.Errorf("Done closed at %v, more than a TTL before the Deadline %v", now, l.Deadline())
	}
	if err := l.Extend(ctx, s.h.TTL); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Extend after Done closed: err = %v, want ErrLost (the holder was already told it lost the lock)", err)
	}
}

func (s *suite) fencing(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	declared := a.Guarantees().Fencing
	var last uint64
	for i := 0; i < 6; i++ {
		lk := a
		if i%2 == 1 {
			lk = b
		}
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second), lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		f, ok := l.Fence()
		if ok != declared {
			t.Fatalf("Fence() ok = %v but Guarantees().Fencing = %v: the declaration must match the lock", ok, declared)
		}
		if ok && i > 0 && f <= last {
			t.Errorf("fence %d after %d: fences must strictly increase across holders", f, last)
		}
		last = f
		release(t, ctx, l)
	}
}

// TTLRanger is implemented by Lockers that report the range of TTLs they
// accept (every backend of lockswap does): below min a lock would have no
// validity left after the clock drift allowance, or the backend cannot
// express it.
type TTLRanger interface {
	TTLRange() (min, max time.Duration)
}

// maxErrLen bounds an error message about a huge key: the key is cut to 200
// bytes, the rest is the backend's text.
const maxErrLen = 1024

func (s *suite) badArguments(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	// "migrate(dual)" names itself "migrate" in messages.
	backend, _, _ := strings.Cut(a.Guarantees().Backend, "(")
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", what, err)
			return
		}
		if backend != "" && !strings.Contains(err.Error(), backend) {
			t.Errorf("%s: error %q does not name the backend %q", what, err, backend)
		}
	}
	_, err := a.TryAcquire(ctx, "", lockswap.WithTTL(time.Second))
	check("TryAcquire with an empty key", err)
	_, err = a.Acquire(ctx, "", lockswap.WithTTL(time.Second))
	check("Acquire with an empty key", err)
	ttls := []time.Duration{0, -time.Second, time.Microsecond, lockswap.MinTTL - 1, lockswap.MaxTTL + 1}
	if r, ok := a.(TTLRanger); ok {
		min, max := r.TTLRange()
		if min < lockswap.MinTTL || max > lockswap.MaxTTL || min > max {
			t.Errorf("TTLRange() = [%v, %v], want within [lockswap.MinTTL, lockswap.MaxTTL]", min, max)
		}
		ttls = append(ttls, min-time.Millisecond, max+time.Millisecond)
	} else {
		t.Errorf("%T has no TTLRange() method: users cannot learn which TTLs it takes", a)
	}
	for _, ttl := range ttls {
		_, err = a.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
		check(fmt.Sprintf("TryAcquire with TTL %v", ttl), err)
		_, err = a.Acquire(ctx, key, lockswap.WithTTL(ttl))
		check(fmt.Sprintf("Acquire with TTL %v", ttl), err)
	}
	// A nil context (users do pass one) is refused, not a panic.
	var nilCtx context.Context
	check("TryAcquire with a nil context", noPanic(func() error { _, err := a.TryAcquire(nilCtx, key); return err }))
	check("Acquire with a nil context", noPanic(func() error { _, err := a.Acquire(nilCtx, key); return err }))
	// Nothing was taken by the rejected calls.
	l := take(t, ctx, b, key, "key taken after rejected calls: %v; bad arguments must change nothing", lockswap.WithTTL(10*time.Second))
	check("Extend with TTL 0", l.Extend(ctx, 0))
	check("Extend with a TTL above lockswap.MaxTTL", l.Extend(ctx, lockswap.MaxTTL+1))
	check("Extend with a nil context", noPanic(func() error { return l.Extend(nilCtx, 10*time.Second) }))
	check("Release with a nil context", noPanic(func() error { return l.Release(nilCtx) }))
	if _, err := a.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("after a rejected Extend the lock is no longer held (%v)", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after a rejected Extend: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release of the same lock: %v, want nil", err)
	}
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Extend after Release: err = %v, want ErrLost", err)
	}
}

// noPanic runs fn and returns its error, or the panic it raised as an
// error.
func noPanic(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn()
}

// oddKeys: keys with NUL, newline, invalid UTF-8 and other odd bytes are
// locks like any other (each excludes, and only itself); a 1 MB key either
// works the same or is refused with ErrInvalid (or, on a backend whose
// requests have a short time limit, is unavailable), is never granted
// twice, and an error about it does not carry the whole key.
func (s *suite) oddKeys(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx := ctxT(t)
	base := s.key(t)
	for _, odd := range []string{"nul\x00byte", "new\nline", "bad\xff\xfeutf8", "sp ace/slash%25{tag}", "\u00e9\u6f22"} {
		key := base + odd
		l, err := a.TryAcquire(ctx, key, s.ttl())
		if err != nil {
			t.Errorf("TryAcquire(%q): %v", key, err)
			continue
		}
		if _, err := b.TryAcquire(ctx, key, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			t.Errorf("second TryAcquire(%q): err = %v, want ErrHeld", key, err)
		}
		// The odd key is not confused with its prefix.
		if l2, err := b.TryAcquire(ctx, base+odd[:1], s.ttl()); err != nil {
			t.Errorf("TryAcquire(%q) while %q is held: %v", base+odd[:1], key, err)
		} else {
			l2.Release(ctx)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release(%q): %v", key, err)
		}
	}
	// Moving 1 MB takes a while on a loaded machine: the huge key's lock
	// gets a TTL that outlasts the requests, so that the second attempt
	// meets it held.
	huge, hugeTTL := base+strings.Repeat("k", 1<<20), lockswap.WithTTL(max(s.h.TTL, 10*time.Second))
	l, err := a.TryAcquire(ctx, huge, hugeTTL)
	switch {
	case err == nil:
		// A backend whose requests have a short time limit (redlock's
		// per-instance timeout) may not move 1 MB in time on a loaded
		// machine: unavailable is an answer too, a second lock is not.
		if _, err := b.TryAcquire(ctx, huge, hugeTTL); !errors.Is(err, lockswap.ErrHeld) && !errors.Is(err, lockswap.ErrUnavailable) {
			t.Errorf("second TryAcquire of a 1 MB key: err = %v, want ErrHeld (or ErrUnavailable)", err)
		} else if len(err.Error()) > maxErrLen {
			t.Errorf("the error about a 1 MB key is %d bytes long, want the key cut (≤ %d)", len(err.Error()), maxErrLen)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release of a 1 MB key: %v", err)
		}
	case errors.Is(err, lockswap.ErrInvalid):
		if len(err.Error()) > maxErrLen {
			t.Errorf("the error refusing a 1 MB key is %d bytes long, want the key cut (≤ %d)", len(err.Error()), maxErrLen)
		}
		begin := time.Now()
		if _, err := a.Acquire(ctx, huge, s.ttl()); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Acquire of a refused 1 MB key: err = %v, want ErrInvalid at once", err)
		} else if d := time.Since(begin); d > 5*time.Second {
			t.Errorf("Acquire of a refused 1 MB key took %v: it was retried", d.Round(time.Millisecond))
		}
	case errors.Is(err, lockswap.ErrUnavailable):
		if len(err.Error()) > maxErrLen {
			t.Errorf("the error about a 1 MB key is %d bytes long, want the key cut (≤ %d)", len(err.Error()), maxErrLen)
		}
		t.Logf("TryAcquire of a 1 MB key: %v (the request took longer than the backend allows)", err)
	default:
		t.Errorf("TryAcquire of a 1 MB key: err = %v, want a lock or ErrInvalid", err)
	}
}

// afterClose: the locks of a closed Locker report ErrClosed from Extend
// and Release.
func (s *suite) afterClose(t *testing.T) {
	lk := s.h.NewLocker(t)
	ctx, key := ctxT(t), s.key(t)
	l := take(t, ctx, lk, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	lk.Close()
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, lockswap.ErrClosed) {
		t.Errorf("Extend after Close: err = %v, want ErrClosed", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrClosed) {
		t.Errorf("Release after Close: err = %v, want ErrClosed", err)
	}
}

func (s *suite) closeLocker(t *testing.T) {
	before := leaked(s.h.Goroutines)
	lk := s.h.NewLocker(t)
	ctx, key := ctxT(t), s.key(t)
	l := take(t, ctx, lk, key, "TryAcquire: %v", lockswap.WithTTL(10*time.Second))
	release(t, ctx, l)
	if err := lk.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrClosed) {
		t.Errorf("TryAcquire after Close: err = %v, want ErrClosed", err)
	}
	var after []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = leaked(s.h.Goroutines)
		if len(after) <= len(before) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(after) > len(before) {
		t.Errorf("%d goroutines of the backend outlived Close:\n%s", len(after)-len(before), strings.Join(after, "\n\n"))
	}
}

// closeEndsWaiters: Close ends the Acquire calls waiting on a held key
// with ErrClosed, promptly (within 100 ms, plus scheduling), for 1 and for
// 100 waiters.
func (s *suite) closeEndsWaiters(t *testing.T) {
	for _, n := range []int{1, 100} {
		t.Run(fmt.Sprintf("%d", n), func(t *testing.T) {
			holder := s.locker(t)
			ctx, key := ctxT(t), s.key(t)
			l := take(t, ctx, holder, key, "TryAcquire: %v", lockswap.WithTTL(30*time.Second))
			defer l.Release(ctx)
			lk := s.h.NewLocker(t)
			errs := make(chan error, n)
			var started sync.WaitGroup
			for range n {
				started.Add(1)
				go func() {
					started.Done()
					wl, err := lk.Acquire(ctx, key, lockswap.WithTTL(30*time.Second))
					if wl != nil {
						wl.Release(ctx)
					}
					errs <- err
				}()
			}
			started.Wait()
			// Close must end waits, not only calls that have not started.
			waitBlocked(t, n, "closeEndsWaiters")
			probe := StartLagProbe()
			defer probe.Stop()
			begin := time.Now()
			lk.Close()
			for i := range n {
				select {
				case err := <-errs:
					if !errors.Is(err, lockswap.ErrClosed) {
						t.Errorf("waiter %d: err = %v, want ErrClosed", i, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%d of %d waiters still waiting 5s after Close", n-i, n)
				}
			}
			d := time.Since(begin)
			if allowed := 100*time.Millisecond + probe.Allowance(); d > allowed {
				t.Errorf("Close ended %d waiters after %v, want within 100ms (allowed %v, with scheduling lags up to %v measured meanwhile)",
					n, d.Round(time.Millisecond), allowed.Round(time.Millisecond), probe.Stop().Round(time.Millisecond))
			}
		})
	}
}

// waitBlocked waits (bounded) until n goroutines started by the suite's
// case fn are blocked inside an Acquire call: waiting on a channel, a
// timer, a lock or the network, which is what a waiting Acquire does.
func waitBlocked(t *testing.T, n int, fn string) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("%d Acquire calls waiting", n), func() bool {
		return blockedIn(".Acquire(", "conformance.(*suite)."+fn) >= n
	})
}

// waitSettled is waitBlocked for one call that must be seen blocked twice,
// 20 ms apart: a goroutine is also blocked for the millisecond its first
// request is in flight, and a call cancelled then has not yet learned what
// it waits for (an etcd Acquire writing its queue entry).
func waitSettled(t *testing.T, fn string) {
	t.Helper()
	eventually(t, 5*time.Second, "an Acquire call waiting", func() bool {
		if blockedIn(".Acquire(", "conformance.(*suite)."+fn) < 1 {
			return false
		}
		time.Sleep(20 * time.Millisecond)
		return blockedIn(".Acquire(", "conformance.(*suite)."+fn) >= 1
	})
}

// blockedIn counts the goroutines blocked with both frames on their stack.
func blockedIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		if k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[running") || strings.Contains(header, "[runnable") {
			continue
		}
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			count++
		}
	}
	return count
}

// leaked returns the stacks of goroutines running code of lockswap (other
// than this suite and tests) or of the extra packages.
func leaked(extra []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lockswap/conformance.") || strings.Contains(g, "testing.tRunner") ||
			strings.Contains(g, "internal/servers.") {
			continue
		}
		match := strings.Contains(g, "github.com/lockswap/lockswap")
		for _, p := range extra {
			match = match || strings.Contains(g, p)
		}
		if match {
			out = append(out, g)
		}
	}
	return out
}

func (s *suite) do(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	ttl := s.h.TTL
	ran := false
	err := lockswap.Do(ctx, a, key, func(ctx context.Context, l lockswap.Lock) error {
		ran = true
		if _, err := b.TryAcquire(ctx, key, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			return fmt.Errorf("inside Do another Locker got %v, want ErrHeld", err)
		}
		// Outlive the TTL: Do's renewal must keep the lock.
		end := time.Now().Add(ttl + ttl/2)
		for time.Now().Before(end) {
			if s.h.AdvanceTime != nil {
				s.h.AdvanceTime(ttl / 10)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("fn's context ended while renewal should keep the lock: %w", context.Cause(ctx))
			case <-time.After(ttl / 10):
			}
		}
		if _, err := b.TryAcquire(ctx, key, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			return fmt.Errorf("after 1.5×TTL inside Do another Locker got %v, want ErrHeld: Do must renew", err)
		}
		return nil
	}, s.ttl())
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if !ran {
		t.Fatal("Do returned nil without running fn")
	}
	l := take(t, ctx, b, key, "after Do returned the key is still held (%v): Do must release", s.ttl())
	l.Release(ctx)
}
