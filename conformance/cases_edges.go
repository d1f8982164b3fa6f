package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

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
	if r, ok := base(a).(TTLRanger); ok {
		min, max := r.TTLRange()
		if min < lockswap.MinTTL || max > lockswap.MaxTTL || min > max {
			t.Errorf("TTLRange() = [%v, %v], want within [lockswap.MinTTL, lockswap.MaxTTL]", min, max)
		}
		ttls = append(ttls, min-time.Millisecond, max+time.Millisecond)
	} else {
		t.Errorf("%T has no TTLRange() method: users cannot learn which TTLs it takes", base(a))
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
