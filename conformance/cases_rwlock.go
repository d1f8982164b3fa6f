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
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/history"
)

// RunReadWrite runs the read-write lock cases (lockswap.WithRead,
// lockswap.WithWrite) as subtests of t, for a backend whose Lockers take
// them: read holds shared, a write hold exclusive of every other hold,
// writer preference, holds freed by Release and by expiry, fences that a
// resource can check (fenced.RW), a mutex, a semaphore and a read-write
// lock on one key refused while either is held, Do with both holds, and
// every case of Run on write holds.
func RunReadWrite(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	s.run(t, []testCase{
		{"Declared", s.rwDeclared},
		{"ReadersShareWriterExcludes", s.readersShare},
		{"NeverWriterWithOthers", s.neverWriterWithOthers},
		{"WriterPreferred", s.writerPreferred},
		{"GivenUpWriterLetsReadersIn", s.givenUpWriter},
		{"OneShotWriterLetsReadersIn", s.oneShotWriter},
		{"TryWriteMarksNothing", s.tryWriteMarksNothing},
		{"ExpiredHoldsFreed", s.expiredHoldsFreed},
		{"RWFences", s.rwFences},
		{"KindsRefused", s.kindsRefused},
		{"BadOptions", s.rwBadOptions},
		{"DoWithHolds", s.doWithHolds},
		// A write hold keeps what a mutex keeps: the whole mutex suite
		// runs on write holds.
		{"MutexCasesAsWriteHolds", func(t *testing.T) { Run(t, asMutex(h, lockswap.WithWrite())) }},
	})
}

// rwGivenOrRefused (in Run, for every backend): WithRead gives a read hold
// or is refused with ErrInvalid, changing nothing; it is never ignored,
// which would hand out the key's mutex to a caller that asked for a
// shared hold. The declaration matches.
func (s *suite) rwGivenOrRefused(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	declared := lk.Guarantees().ReadWrite
	l, err := lk.TryAcquire(ctx, key, lockswap.WithRead(), s.ttl())
	switch {
	case errors.Is(err, lockswap.ErrInvalid):
		m := take(t, ctx, lk, key, "the key's mutex after WithRead was refused: %v (a refusal must change nothing)", s.ttl())
		release(t, ctx, m)
	case err != nil:
		t.Fatalf("WithRead: err = %v, want a read hold or ErrInvalid", err)
	default:
		if !declared {
			t.Error("WithRead gave a hold, but Guarantees().ReadWrite is false: the declaration must match")
		}
		if m := lockswap.ModeOf(l); m != lockswap.ReadHold {
			t.Errorf("WithRead gave a lock whose ModeOf is %v: the option was ignored", m)
		}
		release(t, ctx, l)
	}
}

// rwDeclared: a backend with read-write locks declares them.
func (s *suite) rwDeclared(t *testing.T) {
	if !s.locker(t).Guarantees().ReadWrite {
		t.Error("Guarantees().ReadWrite is false for a backend whose read-write locks the suite tests")
	}
}

// readersShare: read holds of several Lockers are held at once, each with
// a token of its own; a write hold waits for the last of them; a write
// hold excludes readers and writers.
func (s *suite) readersShare(t *testing.T) {
	ctx, key := ctxT(t), s.key(t)
	w := s.locker(t)
	long := lockswap.WithTTL(10 * time.Second)
	var readers []lockswap.Lock
	tokens := map[string]bool{}
	for i := range 3 {
		r := take(t, ctx, s.locker(t), key, fmt.Sprintf("read hold %d while %d are held: %%v (read holds are shared)", i+1, i), lockswap.WithRead(), long)
		if m := lockswap.ModeOf(r); m != lockswap.ReadHold {
			t.Errorf("read hold %d: ModeOf = %v, want read", i+1, m)
		}
		if tokens[r.Token()] {
			t.Errorf("read hold %d has another hold's token", i+1)
		}
		tokens[r.Token()] = true
		readers = append(readers, r)
	}
	for i, r := range readers {
		if _, err := w.TryAcquire(ctx, key, lockswap.WithWrite(), s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("a write hold while %d read holds are held: err = %v, want ErrHeld", len(readers)-i, err)
		}
		release(t, ctx, r)
	}
	wl := take(t, ctx, w, key, "a write hold once every read hold was released: %v", lockswap.WithWrite(), long)
	if m := lockswap.ModeOf(wl); m != lockswap.WriteHold {
		t.Errorf("write hold: ModeOf = %v, want write", m)
	}
	other := s.locker(t)
	for _, opt := range []lockswap.Option{lockswap.WithRead(), lockswap.WithWrite()} {
		if l, err := other.TryAcquire(ctx, key, opt, s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			if l != nil {
				l.Release(ctx)
			}
			t.Errorf("a %v hold while the write hold is held: err = %v, want ErrHeld", lockswap.ModeOf(l), err)
		}
	}
	release(t, ctx, wl)
	r := take(t, ctx, other, key, "a read hold after the write hold was released: %v", lockswap.WithRead(), s.ttl())
	release(t, ctx, r)
}

// neverWriterWithOthers: goroutines of several Lockers take read and write
// holds of one key again and again under Do while counters count who is
// inside: a writer is never inside with anyone, and every goroutine gets
// its holds. The holds are recorded and checked by history.CheckHolds
// too.
func (s *suite) neverWriterWithOthers(t *testing.T) {
	const clients, perClient, rounds = 3, 2, 5
	ctx, key := ctxT(t), s.key(t)
	var readers, writers, violations atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	rec := history.NewHoldRecorder()
	for c := range clients {
		lk := s.locker(t)
		for g := range perClient {
			write := (c+g)%2 == 0
			mode := lockswap.WithRead()
			if write {
				mode = lockswap.WithWrite()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					err := lockswap.Do(ctx, lk, key, func(ctx context.Context, l lockswap.Lock) error {
						from := time.Now()
						defer rec.Held(c*perClient+g, l, 0, from)
						if write {
							if writers.Add(1) != 1 || readers.Load() != 0 {
								violations.Add(1)
							}
							time.Sleep(2 * time.Millisecond) // holding: the work
							writers.Add(-1)
							return nil
						}
						readers.Add(1)
						if writers.Load() != 0 {
							violations.Add(1)
						}
						time.Sleep(2 * time.Millisecond)
						readers.Add(-1)
						return nil
					}, mode, lockswap.WithTTL(10*time.Second), lockswap.WithRetry(lockswap.ConstantRetry(2*time.Millisecond)))
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
		t.Errorf("Do with a read or write hold: %v", err)
	}
	if v := violations.Load(); v > 0 {
		t.Errorf("%d times a writer was inside with another holder", v)
	}
	holds := rec.Holds()
	if v := history.CheckHolds(holds); len(v) > 0 {
		t.Errorf("the history of %d holds has violations: %q", len(holds), v)
	}
}

// writerPreferred: while a reader holds the key and a writer's Acquire
// waits, new read holds are refused (writer preference: a stream of
// readers does not starve the writer); once the reader releases, the
// writer gets the key, and once the writer releases, readers get in.
func (s *suite) writerPreferred(t *testing.T) {
	ctx, key := ctxT(t), s.key(t)
	r1 := take(t, ctx, s.locker(t), key, "the first read hold: %v", lockswap.WithRead(), lockswap.WithTTL(30*time.Second))
	w, reader := s.locker(t), s.locker(t)
	got := make(chan error, 1)
	var wl lockswap.Lock
	go func() {
		var err error
		wl, err = w.Acquire(ctx, key, lockswap.WithWrite(), lockswap.WithTTL(10*time.Second),
			lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
		got <- err
	}()
	// Before the writer's first attempt a reader may still get in; from
	// the moment one is refused the writer waits, and readers stay out.
	eventually(t, 10*time.Second, "a read hold was never refused while a writer waited", func() bool {
		l, err := reader.TryAcquire(ctx, key, lockswap.WithRead(), s.ttl())
		if err == nil {
			release(t, ctx, l)
			return false
		}
		if !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("a read hold while a reader holds and a writer waits: %v, want a hold or ErrHeld", err)
		}
		return true
	})
	for i := range 3 {
		if l, err := reader.TryAcquire(ctx, key, lockswap.WithRead(), s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			if l != nil {
				l.Release(ctx)
			}
			t.Fatalf("read hold %d after one was refused for the waiting writer: err = %v, want ErrHeld (writer preference)", i+1, err)
		}
	}
	release(t, ctx, r1)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiting writer's Acquire after the reader released: %v", err)
		}
	case <-time.After(blockedWithin):
		t.Fatalf("the waiting writer did not get the key within %v of the reader's release", blockedWithin)
	}
	if f1, ok := r1.Fence(); ok {
		if fw, _ := wl.Fence(); fw <= f1 {
			t.Errorf("the writer after the reader got fence %d, the reader had %d: fences rise in grant order", fw, f1)
		}
	}
	release(t, ctx, wl)
	l := take(t, ctx, reader, key, "a read hold after the writer released: %v (its wait must not outlive its grant)", lockswap.WithRead(), s.ttl())
	release(t, ctx, l)
}

// givenUpWriter: a writer whose Acquire gave up (its context's deadline)
// stops keeping readers out by that deadline, not at its TTL.
func (s *suite) givenUpWriter(t *testing.T) {
	ctx, key := ctxT(t), s.key(t)
	r1 := take(t, ctx, s.locker(t), key, "the first read hold: %v", lockswap.WithRead(), lockswap.WithTTL(30*time.Second))
	defer release(t, ctx, r1)
	w, reader := s.locker(t), s.locker(t)
	const wait = 300 * time.Millisecond
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// The writer's TTL is far longer than its wait: the mark must end
	// with the wait.
	_, err := w.Acquire(wctx, key, lockswap.WithWrite(), lockswap.WithTTL(60*time.Second),
		lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
	if !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a writer's Acquire while a reader holds, until its deadline: err = %v, want ErrHeld", err)
	}
	// The mark ends at the writer's deadline: allow a loaded machine's
	// delays on top, far below the writer's 60 s TTL.
	eventually(t, 20*time.Second, "readers stayed out long after the waiting writer gave up", func() bool {
		l, err := reader.TryAcquire(ctx, key, lockswap.WithRead(), s.ttl())
		if err == nil {
			release(t, ctx, l)
			return true
		}
		if !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("a read hold after the writer gave up: %v", err)
		}
		return false
	})
}

// oneShotWriter: a writer's Acquire that gives up after its one attempt
// (NoRetry), with a long TTL, does not keep readers out after it
// returned: the kit removes its mark (driver.Unmarker) at once, not at
// the writer's deadline. A backend whose Acquire waits without polling
// (etcdlease) waits until that deadline instead; its queue key goes with
// the wait (GivenUpWriterLetsReadersIn), and the case is skipped.
func (s *suite) oneShotWriter(t *testing.T) {
	ctx, key := ctxT(t), s.key(t)
	r1 := take(t, ctx, s.locker(t), key, "the first read hold: %v", lockswap.WithRead(), lockswap.WithTTL(60*time.Second))
	defer release(t, ctx, r1)
	w, reader := s.locker(t), s.locker(t)
	const wait = 8 * time.Second
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	deadline, _ := wctx.Deadline()
	_, err := w.Acquire(wctx, key, lockswap.WithWrite(), lockswap.WithTTL(60*time.Second), lockswap.WithRetry(lockswap.NoRetry()))
	if !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a one-shot writer's Acquire while a reader holds: err = %v, want ErrHeld", err)
	}
	if wctx.Err() != nil {
		if w.Guarantees().Wait == lockswap.WaitPoll {
			t.Fatal("a polling backend's Acquire with NoRetry waited for its context: it must make one attempt")
		}
		t.Skip("the writer's Acquire waited for its context (a backend that waits without polling): no one-shot attempt")
	}
	// Without the removal the mark would last until the writer's
	// deadline: readers must get in before it.
	eventually(t, time.Until(deadline)-time.Second, "readers stayed out after a one-shot writer's Acquire returned: its mark must go with it", func() bool {
		l, err := reader.TryAcquire(ctx, key, lockswap.WithRead(), s.ttl())
		if err == nil {
			release(t, ctx, l)
			return true
		}
		if !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("a read hold after the one-shot writer: %v", err)
		}
		return false
	})
}

// tryWriteMarksNothing: a TryAcquire of the write hold that finds the key
// held does not keep readers out: it makes no wait.
func (s *suite) tryWriteMarksNothing(t *testing.T) {
	ctx, key := ctxT(t), s.key(t)
	r1 := take(t, ctx, s.locker(t), key, "the first read hold: %v", lockswap.WithRead(), lockswap.WithTTL(10*time.Second))
	if _, err := s.locker(t).TryAcquire(ctx, key, lockswap.WithWrite(), s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire of the write hold while a reader holds: err = %v, want ErrHeld", err)
	}
	r2 := take(t, ctx, s.locker(t), key, "a read hold after a writer's TryAcquire was refused: %v (TryAcquire must not mark the key)", lockswap.WithRead(), s.ttl())
	release(t, ctx, r2)
	release(t, ctx, r1)
}

// expiredHoldsFreed: a write hold whose holder stopped renewing frees the
// key for readers at its TTL, and a read hold for a writer; the former
// holder's Extend and Release then fail with ErrLost and disturb nothing.
func (s *suite) expiredHoldsFreed(t *testing.T) {
	for _, c := range []struct{ old, next lockswap.Option }{
		{lockswap.WithWrite(), lockswap.WithRead()},
		{lockswap.WithRead(), lockswap.WithWrite()},
	} {
		a, b, third := s.locker(t), s.locker(t), s.locker(t)
		ctx, key := ctxT(t), s.key(t)
		la := take(t, ctx, a, key, "the hold that will expire: %v", c.old, s.ttl())
		lb := s.expireAndTake(t, a, la, b, c.next)
		old, next := lockswap.ModeOf(la), lockswap.ModeOf(lb)
		if err := la.Extend(ctx, s.h.TTL); !errors.Is(err, lockswap.ErrLost) {
			t.Errorf("Extend of an expired %v hold: err = %v, want ErrLost", old, err)
		}
		if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
			t.Errorf("Release of an expired %v hold: err = %v, want ErrLost", old, err)
		}
		if _, err := third.TryAcquire(ctx, key, lockswap.WithWrite(), s.ttl()); !errors.Is(err, lockswap.ErrHeld) {
			t.Errorf("after the expired %v holder's Extend/Release, a write hold got err = %v, want ErrHeld: a stale holder freed the %v hold", old, err, next)
		}
		release(t, ctx, lb)
	}
}

// rwFences: with a fencing backend, every hold takes a higher fence than
// the holds granted before it, and a resource that applies fenced.RW's
// rule rejects a writer and a reader that lost their holds to a later
// conflicting holder, and no legitimate holder.
func (s *suite) rwFences(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	if !a.Guarantees().Fencing {
		t.Skip("the backend gives no fences")
	}
	ctx, key := ctxT(t), s.key(t)
	fence := func(l lockswap.Lock) uint64 {
		f, ok := l.Fence()
		if !ok {
			t.Fatalf("a %v hold of a fencing backend has no fence", lockswap.ModeOf(l))
		}
		return f
	}
	var doc fenced.RW
	// A writer writes, then its hold expires and readers take the key.
	w1 := take(t, ctx, a, key, "the first write hold: %v", lockswap.WithWrite(), s.ttl())
	if err := doc.Write("w1", fence(w1)); err != nil {
		t.Fatalf("the first writer's write: %v", err)
	}
	r1 := s.expireAndTake(t, a, w1, b, lockswap.WithRead())
	r2 := take(t, ctx, b, key, "a second read hold: %v", lockswap.WithRead(), lockswap.WithTTL(10*time.Second))
	if f1, f2 := fence(r1), fence(r2); f1 <= fence(w1) || f2 <= f1 {
		t.Errorf("fences %d (writer), %d, %d (readers, in grant order): each hold must take a higher fence", fence(w1), f1, f2)
	}
	for i, r := range []lockswap.Lock{r2, r1} { // in either order
		if err := doc.Read(fmt.Sprintf("r%d", 2-i), fence(r)); err != nil {
			t.Errorf("a legitimate reader's read: %v", err)
		}
	}
	if err := doc.Write("w1", fence(w1)); !errors.Is(err, fenced.ErrStale) {
		t.Errorf("the expired writer's write after the readers read: err = %v, want fenced.ErrStale", err)
	}
	// The readers release; a third reader reads, its hold expires, a
	// writer takes the key and writes; the third reader's read is then
	// rejected.
	release(t, ctx, r1)
	release(t, ctx, r2)
	r3 := take(t, ctx, b, key, "a third read hold: %v", lockswap.WithRead(), s.ttl())
	if err := doc.Read("r3", fence(r3)); err != nil {
		t.Errorf("the third reader's read: %v", err)
	}
	w2 := s.expireAndTake(t, b, r3, a, lockswap.WithWrite())
	if fence(w2) <= fence(r3) || fence(r3) <= fence(r2) {
		t.Errorf("fences %d, %d (readers), %d (the next writer), in grant order: each hold must take a higher fence", fence(r2), fence(r3), fence(w2))
	}
	if err := doc.Write("w2", fence(w2)); err != nil {
		t.Errorf("the second writer's write: %v", err)
	}
	if err := doc.Read("r3", fence(r3)); !errors.Is(err, fenced.ErrStale) {
		t.Errorf("the expired reader's read after the next writer wrote: err = %v, want fenced.ErrStale", err)
	}
	release(t, ctx, w2)
}

// kindsRefused: a key held as a mutex or a semaphore refuses read and
// write holds, and a key with a read or a write hold refuses the mutex and
// permits, all with ErrInvalid, changing nothing.
func (s *suite) kindsRefused(t *testing.T) {
	a, b := s.locker(t), s.locker(t)
	ctx := ctxT(t)
	long := lockswap.WithTTL(10 * time.Second)
	// kind groups the holds: holds of one kind contend (ErrHeld), of two
	// kinds are refused; the mutex against a permit is the semaphore
	// suite's case.
	held := []struct {
		what, kind string
		opts       []lockswap.Option
	}{
		{"mutex", "mutex", nil},
		{"permit", "semaphore", []lockswap.Option{lockswap.WithPermits(2)}},
		{"read hold", "rw", []lockswap.Option{lockswap.WithRead()}},
		{"write hold", "rw", []lockswap.Option{lockswap.WithWrite()}},
	}
	for _, h := range held {
		key := s.key(t)
		l := take(t, ctx, a, key, "the "+h.what+": %v", append(h.opts, long)...)
		for _, other := range held {
			if other.kind == h.kind || other.kind != "rw" && h.kind != "rw" {
				continue
			}
			if ol, err := b.TryAcquire(ctx, key, append(other.opts, s.ttl())...); !errors.Is(err, lockswap.ErrInvalid) {
				if ol != nil {
					ol.Release(ctx)
				}
				t.Errorf("a %s of a key whose %s is held: err = %v, want ErrInvalid", other.what, h.what, err)
			}
		}
		if err := l.Extend(ctx, 10*time.Second); err != nil {
			t.Errorf("Extend of the %s after the other kinds were refused on it: %v; a refusal must change nothing", h.what, err)
		}
		release(t, ctx, l)
	}
}

// rwBadOptions: WithRead with WithWrite, and either with WithPermits, are
// refused with ErrInvalid and change nothing.
func (s *suite) rwBadOptions(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	for _, opts := range [][]lockswap.Option{
		{lockswap.WithRead(), lockswap.WithWrite()},
		{lockswap.WithRead(), lockswap.WithPermits(2)},
		{lockswap.WithPermits(2), lockswap.WithWrite()},
	} {
		if l, err := lk.TryAcquire(ctx, key, append(opts, s.ttl())...); !errors.Is(err, lockswap.ErrInvalid) {
			if l != nil {
				l.Release(ctx)
			}
			t.Errorf("TryAcquire with %d conflicting options: err = %v, want ErrInvalid", len(opts), err)
		}
		if _, err := lk.Acquire(ctx, key, append(opts, s.ttl())...); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Acquire with %d conflicting options: err = %v, want ErrInvalid", len(opts), err)
		}
	}
	l := take(t, ctx, lk, key, "the key's mutex after the refused options: %v (they must change nothing)", s.ttl())
	release(t, ctx, l)
}

// doWithHolds: Do takes a read hold and a write hold, runs fn with each,
// and releases it.
func (s *suite) doWithHolds(t *testing.T) {
	lk := s.locker(t)
	ctx, key := ctxT(t), s.key(t)
	for want, opt := range map[lockswap.RWMode]lockswap.Option{lockswap.ReadHold: lockswap.WithRead(), lockswap.WriteHold: lockswap.WithWrite()} {
		var mode lockswap.RWMode
		err := lockswap.Do(ctx, lk, key, func(ctx context.Context, l lockswap.Lock) error {
			mode = lockswap.ModeOf(l)
			return nil
		}, opt, s.ttl())
		if err != nil || mode != want {
			t.Fatalf("Do with a %v hold: %v (ModeOf in fn: %v)", want, err, mode)
		}
	}
	l := take(t, ctx, lk, key, "the write hold after Do released its holds: %v", lockswap.WithWrite(), s.ttl())
	release(t, ctx, l)
}
