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
	"github.com/lockswap/lockswap/history"
)

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

// history runs three clients over two keys, each section an increment of
// a register the lock alone protects, and checks the recorded history
// with package history: linearizable (no lost update, so no second holder
// the data can see), and with a fencing backend, fences that rise from
// one holder to the next and never repeat. The register checks fences
// when the backend gives them.
func (s *suite) history(t *testing.T) {
	ctx := ctxT(t)
	var lks []lockswap.Locker
	for range 3 {
		lks = append(lks, s.locker(t))
	}
	fencing := lks[0].Guarantees().Fencing
	rec, reg := history.NewRecorder(), history.NewRegister(fencing)
	keys := []string{s.key(t), s.key(t)}
	w := history.Workload{Lockers: lks, Keys: keys, Sections: 10, TTL: 10 * time.Second, Register: reg, Recorder: rec,
		Between: func(context.Context, int, lockswap.Lock) { runtime.Gosched() }}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ops := rec.Ops()
	r, err := history.Check(ops, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Linearizable {
		t.Errorf("the history of %d sections is not linearizable: violations on %q, undecided on %q", len(ops), r.Violations, r.Unknown)
	}
	if fencing && r.Fences != nil {
		t.Errorf("fence violations: %q", r.Fences)
	}
	for _, op := range ops {
		if !op.Wrote || op.Late {
			t.Errorf("section %+v: want written, within its lock (TTL 10 s)", op)
		}
	}
	if n := reg.Value(keys[0]) + reg.Value(keys[1]); n != int64(len(ops)) || len(ops) != 30 {
		t.Errorf("%d sections, the registers count %d; want 30 and 30", len(ops), n)
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
	if d, ok := base(lk).(interface{ DefaultTTL() time.Duration }); ok {
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
	if d, ok := base(lk).(interface{ DefaultTTL() time.Duration }); ok && d.DefaultTTL() != def {
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
