package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// Slack is what [RunFaults] allows a call past its context's deadline: the
// bound every built-in backend declares in its Guarantees
// (DeadlineOverrun, which is lockswap.DeadlineGrace) plus a scheduling
// allowance of 200 ms for a loaded machine running the race detector.
// `lockswap compare` checks its hung-server scenario against the same sum:
// a backend's declared DeadlineOverrun plus the same allowance.
const Slack = lockswap.DeadlineGrace + 200*time.Millisecond

// Fault is a way a backend's servers misbehave, for [RunFaults].
type Fault struct {
	// Name names the fault: "no-reply" (a listener that accepts and never
	// answers), "paused" (a SIGSTOPped server), "slow" (every reply
	// delayed by 10 s).
	Name string
	// NewLocker returns a new Locker whose servers work until start is
	// called and misbehave from then on, until the test ends. The suite
	// closes the Locker. Each call makes servers of its own, or ones that
	// the fault of another call does not touch.
	NewLocker func(t *testing.T) (lk lockswap.Locker, start func())
}

// Overruns records, per case, the worst time a call took past its
// deadline (negative: it returned before), for reports ("worst overrun").
// RunFaults adds to it.
type Overruns struct {
	mu    sync.Mutex
	worst map[string]time.Duration
}

func (o *Overruns) add(name string, d time.Duration) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.worst == nil {
		o.worst = map[string]time.Duration{}
	}
	if cur, ok := o.worst[name]; !ok || d > cur {
		o.worst[name] = d
	}
}

// Worst returns the worst overrun recorded under each case name.
func (o *Overruns) Worst() map[string]time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]time.Duration, len(o.worst))
	for k, v := range o.worst {
		out[k] = v
	}
	return out
}

// RunFaults checks that every call of the backend keeps its deadline under
// each fault: Acquire, TryAcquire, Extend and Release return within their
// context's deadline plus [Slack], with an error and no lock; a Release
// with a context that has already ended returns within Slack; Close returns
// within a second even while its servers misbehave. ttl is the lock TTL
// the cases use. o, when not nil, records the overruns measured.
func RunFaults(t *testing.T, ttl time.Duration, faults []Fault, o *Overruns) {
	t.Helper()
	const budget = 200 * time.Millisecond
	for _, f := range faults {
		t.Run(f.Name, func(t *testing.T) {
			newLocker := func(t *testing.T) (lockswap.Locker, func()) {
				lk, start := f.NewLocker(t)
				t.Cleanup(func() { lk.Close() })
				return lk, start
			}
			key := func(t *testing.T) string {
				return fmt.Sprintf("faults-%s-%d", f.Name, time.Now().UnixNano())
			}
			within := func(t *testing.T, what string, d time.Duration, call func(ctx context.Context) error) error {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				begin := time.Now()
				err := call(ctx)
				over := time.Since(begin) - d
				o.add(f.Name+"/"+what, over)
				if over > Slack {
					t.Errorf("%s under %s: returned %v past its %v deadline (allowed: %v): %v", what, f.Name, over.Round(time.Millisecond), d, Slack, err)
				}
				return err
			}
			t.Run("TryAcquire", func(t *testing.T) {
				lk, start := newLocker(t)
				start()
				var l lockswap.Lock
				err := within(t, "TryAcquire", budget, func(ctx context.Context) (err error) {
					l, err = lk.TryAcquire(ctx, key(t), lockswap.WithTTL(ttl))
					return err
				})
				if err == nil || l != nil {
					t.Errorf("TryAcquire under %s = (%v, %v), want an error and no lock", f.Name, l, err)
				}
			})
			t.Run("Acquire", func(t *testing.T) {
				lk, start := newLocker(t)
				start()
				var l lockswap.Lock
				err := within(t, "Acquire", budget, func(ctx context.Context) (err error) {
					l, err = lk.Acquire(ctx, key(t), lockswap.WithTTL(ttl))
					return err
				})
				if err == nil || l != nil {
					t.Errorf("Acquire under %s = (%v, %v), want an error and no lock", f.Name, l, err)
				}
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, lockswap.ErrUnavailable) {
					t.Errorf("Acquire under %s: err = %v, want it to match ErrUnavailable or the context's error", f.Name, err)
				}
			})
			held := func(t *testing.T) (lockswap.Locker, lockswap.Lock, func()) {
				lk, start := newLocker(t)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				l, err := lk.TryAcquire(ctx, key(t), lockswap.WithTTL(ttl))
				if err != nil {
					t.Fatalf("TryAcquire before the fault: %v", err)
				}
				return lk, l, start
			}
			t.Run("Extend", func(t *testing.T) {
				_, l, start := held(t)
				start()
				err := within(t, "Extend", budget, func(ctx context.Context) error { return l.Extend(ctx, ttl) })
				if err == nil {
					t.Errorf("Extend under %s succeeded; want an error", f.Name)
				}
			})
			t.Run("Release", func(t *testing.T) {
				_, l, start := held(t)
				start()
				err := within(t, "Release", budget, func(ctx context.Context) error { return l.Release(ctx) })
				if err == nil {
					t.Errorf("Release under %s succeeded; want an error (the outcome is unknown)", f.Name)
				} else if !errors.Is(err, lockswap.ErrUnavailable) {
					t.Errorf("Release under %s: err = %v, want it to match ErrUnavailable", f.Name, err)
				}
			})
			t.Run("ReleaseEndedContext", func(t *testing.T) {
				_, l, start := held(t)
				start()
				within(t, "ReleaseEndedContext", 0, func(ctx context.Context) error { return l.Release(ctx) })
			})
			t.Run("Close", func(t *testing.T) {
				lk, l, start := held(t)
				start()
				// A release whose outcome is unknown goes on in the
				// background; Close must end it, and in time.
				within(t, "Release", budget, func(ctx context.Context) error { return l.Release(ctx) })
				begin := time.Now()
				lk.Close()
				if d := time.Since(begin); d > time.Second {
					t.Errorf("Close under %s took %v, want at most 1s", f.Name, d.Round(time.Millisecond))
				}
				o.add(f.Name+"/Close (duration)", time.Since(begin))
			})
		})
	}
}
