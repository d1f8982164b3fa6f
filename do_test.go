package lockswap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/memlock"
)

// faultyLocker wraps a Locker so that Extend can be made to fail and calls
// are counted.
type faultyLocker struct {
	lockswap.Locker
	extendErr atomic.Pointer[error]
	extends   atomic.Int32
}

func (f *faultyLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	l, err := f.Locker.Acquire(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return &faultyLock{Lock: l, f: f}, nil
}

type faultyLock struct {
	lockswap.Lock
	f *faultyLocker
}

func (l *faultyLock) Extend(ctx context.Context, ttl time.Duration) error {
	l.f.extends.Add(1)
	if e := l.f.extendErr.Load(); e != nil {
		return *e
	}
	return l.Lock.Extend(ctx, ttl)
}

func TestDoRenewsAndReleases(t *testing.T) {
	store := memlock.NewStore()
	f := &faultyLocker{Locker: memlock.New(store)}
	other := memlock.New(store)
	ctx := context.Background()
	// A TTL a busy machine's scheduling delays do not starve (150 ms did
	// not hold), renewed often.
	ttl, every := 300*time.Millisecond, 20*time.Millisecond
	err := lockswap.Do(ctx, f, "job", func(ctx context.Context, l lockswap.Lock) error {
		// Wait until renewal has extended the lock past its first deadline.
		first := l.Deadline()
		for f.extends.Load() < 4 || !time.Now().After(first) {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(5 * time.Millisecond):
			}
		}
		if !l.Deadline().After(first) {
			return fmt.Errorf("deadline did not move after %d renewals", f.extends.Load())
		}
		if _, err := other.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
			return fmt.Errorf("key free while Do holds it past its TTL: %v", err)
		}
		return nil
	}, lockswap.WithTTL(ttl), lockswap.WithRenewEvery(every))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	n := f.extends.Load()
	time.Sleep(10 * every) // nothing may renew after Do returned: give a stray renewer the chance to show itself
	if m := f.extends.Load(); m != n {
		t.Errorf("%d Extend calls after Do returned: renewal must stop synchronously", m-n)
	}
	l, err := other.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("key still held after Do returned: %v", err)
	}
	l.Release(ctx)
}

func TestDoCancelsBeforeDeadlineWhenRenewalFails(t *testing.T) {
	f := &faultyLocker{Locker: memlock.New(memlock.NewStore())}
	down := fmt.Errorf("injected: %w", lockswap.ErrUnavailable)
	f.extendErr.Store(&down)
	var deadline, cancelledAt time.Time
	err := lockswap.Do(context.Background(), f, "job", func(ctx context.Context, l lockswap.Lock) error {
		deadline = l.Deadline()
		select {
		case <-ctx.Done():
			cancelledAt = time.Now()
			return context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return errors.New("fn's context was never cancelled although renewal kept failing")
		}
	}, lockswap.WithTTL(time.Second))
	if !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Do = %v, want an error matching ErrLost", err)
	}
	if !cancelledAt.Before(deadline) {
		t.Errorf("fn's context ended at %v, not before the lock's deadline %v", cancelledAt, deadline)
	}
	if f.extends.Load() < 2 {
		t.Errorf("only %d renewal attempts: a transient failure must be retried within the validity", f.extends.Load())
	}
}

func TestDoReportsLoss(t *testing.T) {
	f := &faultyLocker{Locker: memlock.New(memlock.NewStore())}
	lost := fmt.Errorf("injected: %w", lockswap.ErrLost)
	var cause error
	err := lockswap.Do(context.Background(), f, "job", func(ctx context.Context, l lockswap.Lock) error {
		f.extendErr.Store(&lost)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil
	}, lockswap.WithTTL(90*time.Millisecond))
	if !errors.Is(err, lockswap.ErrLost) || !errors.Is(cause, lockswap.ErrLost) {
		t.Fatalf("Do = %v, fn's cause = %v; both must match ErrLost", err, cause)
	}
}

func TestDoMaxHold(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	var mu sync.Mutex
	var cause error
	var deadline, end time.Time
	start := time.Now()
	err := lockswap.Do(context.Background(), lk, "job", func(ctx context.Context, l lockswap.Lock) error {
		<-ctx.Done()
		mu.Lock()
		defer mu.Unlock()
		cause, deadline, end = context.Cause(ctx), l.Deadline(), time.Now()
		return ctx.Err()
	}, lockswap.WithTTL(3*time.Second), lockswap.WithMaxHold(150*time.Millisecond))
	if !errors.Is(cause, lockswap.ErrMaxHold) {
		t.Fatalf("fn's context cause = %v, want ErrMaxHold", cause)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want fn's error", err)
	}
	if !end.Before(deadline) {
		t.Errorf("work ended at %v, after the lock's deadline %v", end, deadline)
	}
	// The hold time, not the renewal interval (1s) or the TTL, ends the work.
	if held := end.Sub(start); held >= time.Second {
		t.Errorf("work ran %v with a maximum hold time of 150ms", held)
	}
}

func TestDoRenewIntervalLongerThanTTL(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	var deadline, cancelledAt time.Time
	var cause error
	probe := conformance.StartLagProbe()
	err := lockswap.Do(context.Background(), lk, "job", func(ctx context.Context, l lockswap.Lock) error {
		deadline = l.Deadline()
		<-ctx.Done()
		cancelledAt, cause = time.Now(), context.Cause(ctx)
		return nil
	}, lockswap.WithTTL(time.Second), lockswap.WithRenewEvery(5*time.Second)) // the margin before the deadline is TTL/10: room for a loaded machine
	if !errors.Is(err, lockswap.ErrLost) || !errors.Is(cause, lockswap.ErrLost) {
		t.Fatalf("Do = %v, cause %v; want ErrLost: no renewal came before the deadline", err, cause)
	}
	// fn sees the cancellation when the scheduler runs it: on a busy
	// machine that is later than Do issued it, by the delays measured.
	if probe.Stop(); !cancelledAt.Before(deadline.Add(probe.Extra())) {
		t.Errorf("fn cancelled at %v, not before the deadline %v (+%v for the scheduling lag measured)", cancelledAt, deadline, probe.Extra())
	}
}

// ttlLocker gives every acquisition a default TTL of its own and tells
// nobody: Do must renew by the TTL the lock was taken with (Lock.TTL), not
// by lockswap.DefaultTTL.
type ttlLocker struct {
	lockswap.Locker
	ttl time.Duration
}

func (l ttlLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return l.Locker.Acquire(ctx, key, append([]lockswap.Option{lockswap.WithTTL(l.ttl)}, opts...)...)
}

func TestDoRenewsWithTheLockersTTL(t *testing.T) {
	// A second, far below lockswap.DefaultTTL, and long enough that a busy
	// machine's scheduling delays do not starve the renewal (200 ms did).
	lk := ttlLocker{memlock.New(memlock.NewStore()), time.Second}
	err := lockswap.Do(context.Background(), lk, "job", func(ctx context.Context, l lockswap.Lock) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cancelled although renewal should hold a 1s lock: %w", context.Cause(ctx))
		case <-time.After(2500 * time.Millisecond): // several TTLs of work
			return nil
		}
	})
	if err != nil {
		t.Fatalf("Do without WithTTL over a Locker with a 1s default: %v", err)
	}
}

func TestDoReleasesWhenFnPanics(t *testing.T) {
	store := memlock.NewStore()
	lk := memlock.New(store)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not propagate")
			}
		}()
		lockswap.Do(context.Background(), lk, "job", func(context.Context, lockswap.Lock) error { panic("boom") })
	}()
	l, err := memlock.New(store).TryAcquire(context.Background(), "job")
	if err != nil {
		t.Fatalf("lock left behind after fn panicked: %v", err)
	}
	l.Release(context.Background())
}

func TestDoBadArguments(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	called := false
	err := lockswap.Do(context.Background(), lk, "job", func(context.Context, lockswap.Lock) error { called = true; return nil }, lockswap.WithTTL(-1))
	if !errors.Is(err, lockswap.ErrInvalid) || called {
		t.Fatalf("Do with a negative TTL: err = %v, fn called = %v", err, called)
	}
}

func ExampleDo() {
	locker := memlock.New(memlock.NewStore())
	err := lockswap.Do(context.Background(), locker, "nightly-report", func(ctx context.Context, l lockswap.Lock) error {
		// Work here while ctx is alive; Do renews the lock in the background
		// and cancels ctx before the lock could lapse.
		fmt.Println("working under", l.Key())
		return nil
	}, lockswap.WithTTL(30*time.Second))
	fmt.Println("done:", err)
	// Output:
	// working under nightly-report
	// done: <nil>
}

// TestDoNilArguments: Do with a nil context, a nil Locker (also a nil
// pointer of a Locker type) or a nil function returns ErrInvalid naming
// the argument, without a panic and without taking the lock.
func TestDoNilArguments(t *testing.T) {
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	ctx := context.Background()
	work := func(context.Context, lockswap.Lock) error { return nil }
	var nilLocker *memlock.Locker
	for _, c := range []struct {
		name    string
		do      func() error
		mention string
	}{
		{"nil ctx", func() error { return lockswap.Do(nil, lk, "k", work) }, "ctx"}, //nolint:staticcheck // a nil context is what is tested
		{"nil Locker", func() error { return lockswap.Do(ctx, nil, "k", work) }, "locker"},
		{"nil *memlock.Locker", func() error { return lockswap.Do(ctx, nilLocker, "k", work) }, "locker"},
		{"nil fn", func() error { return lockswap.Do(ctx, lk, "k", nil) }, "fn"},
	} {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return c.do()
		}()
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("Do with a %s: %v, want ErrInvalid naming %q", c.name, err, c.mention)
		}
		l, err := lk.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatalf("after Do with a %s the key is not free: %v", c.name, err)
		}
		l.Release(ctx)
	}
}
