package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
)

// RunSemaphore runs the counting-semaphore cases (lockswap.WithPermits) as
// subtests of t, for a backend whose Lockers take permits: never more
// holders than the limit, a permit freed by Release and by expiry, limits
// checked, a mutex and a semaphore on one key refused while either is
// held, fences that rise per slot, Do with a permit, and every case of
// Run on permits of limit 1.
func RunSemaphore(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	s.run(t, []testCase{
		{"Declared", s.permitsDeclared},
		{"PermitsUpToLimit", s.permitsUpToLimit},
		{"NeverMoreThanLimit", s.neverMoreThanLimit},
		{"ExpiredPermitFreed", s.expiredPermitFreed},
		{"BadLimits", s.badLimits},
		{"MixedLimitsRefused", s.mixedLimits},
		{"MutexAndSemaphoreRefused", s.mutexAndSemaphore},
		{"SlotFences", s.slotFences},
		{"KeyFreedForOtherKind", s.keyFreedForOtherKind},
		{"DoWithPermit", s.doWithPermit},
		// A permit of limit 1 keeps what a mutex keeps: the whole mutex
		// suite (expiry, a vanished holder, cancellation, Close, bad
		// input, fencing, the history check) runs on one.
		{"MutexCasesAsOnePermit", func(t *testing.T) { Run(t, asMutex(h, lockswap.WithPermits(1))) }},
	})
}

// permitsGivenOrRefused (in Run, for every backend): WithPermits gives a
// permit (a lock with a Slot) or is refused with ErrInvalid, changing
// nothing; it is never ignored, which would hand out the key's mutex to a
// caller that asked for one of several permits.
func (s *suite) permitsGivenOrRefused(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	declared := lk.Guarantees().Permits
	l, err := lk.TryAcquire(ctx, key, lockswap.WithPermits(2), s.ttl())
	if err == nil && !declared {
		t.Error("WithPermits(2) gave a permit, but Guarantees().Permits is false: the declaration must match")
	}
	switch {
	case errors.Is(err, lockswap.ErrInvalid):
		m := take(t, ctx, lk, key, "the key's mutex after WithPermits was refused: %v (a refusal must change nothing)", s.ttl())
		release(t, ctx, m)
	case err != nil:
		t.Fatalf("WithPermits(2): err = %v, want a permit or ErrInvalid", err)
	default:
		if _, ok := lockswap.Slot(l); !ok {
			t.Error("WithPermits(2) gave a lock that is no permit: the option was ignored")
		}
		release(t, ctx, l)
	}
}

// permitsDeclared: a backend with semaphores declares them
// (Guarantees().Permits), so that require=semaphores and compare's table
// say so.
func (s *suite) permitsDeclared(t *testing.T) {
	if !s.locker(t).Guarantees().Permits {
		t.Error("Guarantees().Permits is false for a backend whose permits the semaphore suite tests")
	}
}

// permitsUpToLimit: limit holders get a permit each, in distinct slots
// below the limit, with distinct tokens; one more finds them all held
// (ErrHeld); a Release frees a permit, which the next holder gets.
func (s *suite) permitsUpToLimit(t *testing.T) {
	const limit = 3
	ctx, key := ctxT(t), s.key(t)
	permits := lockswap.WithPermits(limit)
	slots := map[int]bool{}
	tokens := map[string]bool{}
	var held []lockswap.Lock
	for i := range limit {
		l := take(t, ctx, s.locker(t), key, fmt.Sprintf("permit %d of %d: %%v", i+1, limit), permits, lockswap.WithTTL(10*time.Second))
		held = append(held, l)
		slot, ok := lockswap.Slot(l)
		if !ok || slot < 0 || slot >= limit || slots[slot] {
			t.Errorf("permit %d: Slot() = %d, %v; want a slot of its own below the limit %d (taken: %v)", i+1, slot, ok, limit, slots)
		}
		slots[slot] = true
		if tokens[l.Token()] {
			t.Errorf("permit %d has another permit's token", i+1)
		}
		tokens[l.Token()] = true
	}
	extra := s.locker(t)
	if _, err := extra.TryAcquire(ctx, key, permits, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a permit beyond the limit %d: err = %v, want ErrHeld", limit, err)
	}
	freed, _ := lockswap.Slot(held[1])
	release(t, ctx, held[1])
	l := take(t, ctx, extra, key, "a permit after a Release freed one: %v", permits, s.ttl())
	if slot, _ := lockswap.Slot(l); slot != freed {
		t.Errorf("the permit after a Release got slot %d, want the freed slot %d (the others are held)", slot, freed)
	}
	for _, l := range append(held[:1], append(held[2:], l)...) {
		release(t, ctx, l)
	}
}

// neverMoreThanLimit: goroutines of several Lockers take permits of one
// key again and again while a counter counts the holders inside: it never
// exceeds the limit, and every goroutine gets permits. The holds are
// recorded and checked by history.CheckHolds too (each from its Acquire's
// return to its Release's call or deadline).
func (s *suite) neverMoreThanLimit(t *testing.T) {
	const (
		limit, clients, perClient, rounds = 2, 3, 2, 5
	)
	ctx, key := ctxT(t), s.key(t)
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	rec := history.NewHoldRecorder()
	for c := range clients {
		lk := s.locker(t)
		for g := range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					err := lockswap.Do(ctx, lk, key, func(ctx context.Context, l lockswap.Lock) error {
						from := time.Now()
						defer rec.Held(c*perClient+g, l, limit, from)
						n := inside.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(2 * time.Millisecond) // holding the permit: the work
						inside.Add(-1)
						return nil
					}, lockswap.WithPermits(limit), lockswap.WithTTL(10*time.Second), lockswap.WithRetry(lockswap.ConstantRetry(2*time.Millisecond)))
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Do with a permit: %v", err)
	}
	if m := most.Load(); m > limit {
		t.Errorf("%d holders inside at once, the limit is %d", m, limit)
	}
	holds := rec.Holds()
	if v := history.CheckHolds(holds); len(v) > 0 {
		t.Errorf("the history of %d permits has violations: %q", len(holds), v)
	}
}

// expiredPermitFreed: a permit whose holder stopped renewing is freed at
// its TTL, and the holder's Extend and Release then fail with ErrLost
// without disturbing the new holder.
func (s *suite) expiredPermitFreed(t *testing.T) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	one := lockswap.WithPermits(1)
	la := take(t, ctx, a, key, "TryAcquire of a permit: %v", one, s.ttl())
	lb := s.expireAndTake(t, a, la, b, one)
	if err := la.Extend(ctx, s.h.TTL); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Extend of an expired permit taken by another: err = %v, want ErrLost", err)
	}
	if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Release of an expired permit taken by another: err = %v, want ErrLost", err)
	}
	if _, err := c.TryAcquire(ctx, key, one, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("after the former holder's Extend/Release a third Locker got err = %v, want ErrHeld: a stale holder freed the new holder's permit", err)
	}
	release(t, ctx, lb)
}

// badLimits: a limit of 0, a negative one and one above MaxPermits are
// refused with ErrInvalid, and change nothing: a permit of the key's
// valid limit is still free after them.
func (s *suite) badLimits(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	for _, n := range []int{0, -1, lockswap.MaxPermits + 1} {
		if l, err := lk.TryAcquire(ctx, key, lockswap.WithPermits(n), s.ttl()); !errors.Is(err, lockswap.ErrInvalid) {
			if l != nil {
				l.Release(ctx)
			}
			t.Errorf("WithPermits(%d): err = %v, want ErrInvalid", n, err)
		}
		if _, err := lk.Acquire(ctx, key, lockswap.WithPermits(n), s.ttl()); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Acquire WithPermits(%d): err = %v, want ErrInvalid", n, err)
		}
	}
	l := take(t, ctx, lk, key, "a permit of limit 1 after the refused limits: %v (they must change nothing)", lockswap.WithPermits(1), s.ttl())
	release(t, ctx, l)
	l = take(t, ctx, lk, key, "a permit of limit MaxPermits: %v", lockswap.WithPermits(lockswap.MaxPermits), s.ttl())
	release(t, ctx, l)
}

// mixedLimits: while permits of a key are held with one limit, a call
// with another is refused with ErrInvalid (not ErrHeld: waiting cannot
// fix it), and the held permits stay.
func (s *suite) mixedLimits(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	la := take(t, ctx, a, key, "a permit of limit 2: %v", lockswap.WithPermits(2), lockswap.WithTTL(10*time.Second))
	for _, n := range []int{1, 3} {
		if l, err := b.TryAcquire(ctx, key, lockswap.WithPermits(n), s.ttl()); !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, lockswap.ErrHeld) {
			if l != nil {
				l.Release(ctx)
			}
			t.Errorf("limit %d while permits of limit 2 are held: err = %v, want ErrInvalid only", n, err)
		}
	}
	lb := take(t, ctx, b, key, "the second permit of limit 2, after the refused limits: %v", lockswap.WithPermits(2), s.ttl())
	release(t, ctx, lb)
	release(t, ctx, la)
}

// mutexAndSemaphore: a key whose mutex is held refuses a permit, and a key
// with a permit held refuses its mutex, both with ErrInvalid.
func (s *suite) mutexAndSemaphore(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx := ctxT(t)
	mutexKey, semKey := s.key(t), s.key(t)
	lm := take(t, ctx, a, mutexKey, "the mutex: %v", lockswap.WithTTL(10*time.Second))
	if l, err := b.TryAcquire(ctx, mutexKey, lockswap.WithPermits(2), s.ttl()); !errors.Is(err, lockswap.ErrInvalid) {
		if l != nil {
			l.Release(ctx)
		}
		t.Errorf("a permit of a key whose mutex is held: err = %v, want ErrInvalid", err)
	}
	lp := take(t, ctx, a, semKey, "a permit: %v", lockswap.WithPermits(2), lockswap.WithTTL(10*time.Second))
	if l, err := b.TryAcquire(ctx, semKey, s.ttl()); !errors.Is(err, lockswap.ErrInvalid) {
		if l != nil {
			l.Release(ctx)
		}
		t.Errorf("the mutex of a key with a permit held: err = %v, want ErrInvalid", err)
	}
	// The refusals changed nothing: both holders still hold.
	for _, l := range []lockswap.Lock{lm, lp} {
		if err := l.Extend(ctx, 10*time.Second); err != nil {
			t.Errorf("Extend of %s after the other kind was refused on it: %v; a refusal must change nothing", l.Key(), err)
		}
		release(t, ctx, l)
	}
}

// slotFences: with a fencing backend, the fence of a slot rises with every
// new holder of that slot, also across a change of the key's limit (3,
// then 2 once those permits ended, then 3 again).
func (s *suite) slotFences(t *testing.T) {
	lk := s.locker(t)
	if !lk.Guarantees().Fencing {
		t.Skip("the backend gives no fences")
	}
	ctx, key := ctxT(t), s.key(t)
	newest := map[int]uint64{}
	for round, limit := range []int{1, 1, 3, 2, 3} {
		var held []lockswap.Lock
		for range limit {
			l := take(t, ctx, lk, key, fmt.Sprintf("a permit of limit %d: %%v", limit), lockswap.WithPermits(limit), s.ttl())
			held = append(held, l)
			f, ok := l.Fence()
			slot, _ := lockswap.Slot(l)
			if !ok || f <= newest[slot] {
				t.Errorf("round %d (limit %d): slot %d got fence %d (%v); its holder before had %d: a slot's fence must rise", round+1, limit, slot, f, ok, newest[slot])
			}
			newest[slot] = f
		}
		for _, l := range held {
			release(t, ctx, l)
		}
	}
}

// keyFreedForOtherKind: once every permit of a key is released its mutex
// can be taken, and once the mutex is released permits can.
func (s *suite) keyFreedForOtherKind(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	var held []lockswap.Lock
	for range 2 {
		held = append(held, take(t, ctx, lk, key, "a permit: %v", lockswap.WithPermits(2), s.ttl()))
	}
	for _, l := range held {
		release(t, ctx, l)
	}
	m := take(t, ctx, lk, key, "the mutex of a key whose permits were all released: %v", s.ttl())
	release(t, ctx, m)
	p := take(t, ctx, lk, key, "a permit of a key whose mutex was released: %v", lockswap.WithPermits(3), s.ttl())
	release(t, ctx, p)
}

// doWithPermit: Do takes a permit, runs fn with it and releases it.
func (s *suite) doWithPermit(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	ran := false
	err := lockswap.Do(ctx, lk, key, func(ctx context.Context, l lockswap.Lock) error {
		if _, ok := lockswap.Slot(l); !ok {
			t.Error("Do with WithPermits gave a lock that is no permit")
		}
		ran = true
		return nil
	}, lockswap.WithPermits(1), s.ttl())
	if err != nil || !ran {
		t.Fatalf("Do with a permit: %v (ran %v)", err, ran)
	}
	l := take(t, ctx, lk, key, "the permit after Do released it: %v", lockswap.WithPermits(1), s.ttl())
	release(t, ctx, l)
}
