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

// Slack is the least [RunFaults] allows a call past its context's
// deadline: the bound every built-in backend declares in its Guarantees
// (DeadlineOverrun, which is lockswap.DeadlineGrace) plus a scheduling
// floor of 200 ms for a loaded machine running the race detector. On top
// of it each call is allowed [LagFactor] times the scheduling lag a
// [LagProbe] measured while it ran ([LagProbe.Allowance]).
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
// context's deadline plus [Slack] (and the scheduling lag measured
// meanwhile, [LagProbe]), with an error and no lock; an Acquire without a
// deadline returns within its outage bound (lockswap.WithMaxOutage) of its
// start, with an error matching lockswap.ErrUnavailable; a Release
// with a context that has already ended returns within Slack; Close returns
// within a second even while its servers misbehave. ttl is the lock TTL
// the cases use. o, when not nil, records the overruns measured.
func RunFaults(t *testing.T, ttl time.Duration, faults []Fault, o *Overruns) {
	t.Helper()
	const budget = 200 * time.Millisecond
	// The outage bound of the Acquire without a deadline: shorter than
	// lockswap.DefaultMaxOutage to keep the suite short, and shorter than
	// lockswap.RequestTimeout, so that a first attempt left to its request
	// timeout shows.
	const outageBound = time.Second
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
				probe := StartLagProbe()
				begin := time.Now()
				err := call(ctx)
				over := time.Since(begin) - d
				probe.Stop()
				o.add(f.Name+"/"+what, over)
				if allowed := probe.Allowance(); over > allowed {
					t.Errorf("%s under %s: returned %v past its %v deadline (allowed: %v, with scheduling lags up to %v measured meanwhile): %v",
						what, f.Name, over.Round(time.Millisecond), d, allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond), err)
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
			t.Run("AcquireOutage", func(t *testing.T) {
				// No deadline: the outage bound alone ends the wait,
				// counted from the start of Acquire, not from its first
				// failed attempt (which a server that never answers makes
				// last lockswap.RequestTimeout).
				lk, start := newLocker(t)
				start()
				probe := StartLagProbe()
				begin := time.Now()
				l, err := lk.Acquire(context.Background(), key(t), lockswap.WithTTL(ttl), lockswap.WithMaxOutage(outageBound))
				took := time.Since(begin)
				probe.Stop()
				if err == nil || l != nil || !errors.Is(err, lockswap.ErrUnavailable) {
					t.Errorf("Acquire under %s with no deadline = (%v, %v), want no lock and ErrUnavailable", f.Name, l, err)
				}
				if allowed := outageBound + probe.Allowance(); took > allowed {
					t.Errorf("Acquire under %s with no deadline took %v, want at most its %v outage bound (allowed %v, with scheduling lags up to %v measured meanwhile): %v",
						f.Name, took.Round(time.Millisecond), outageBound, allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond), err)
				}
			})
			held := func(t *testing.T) (lockswap.Locker, lockswap.Lock, func()) {
				lk, start := newLocker(t)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				// Acquire, not TryAcquire: before the fault the servers
				// are healthy, but on a busy machine one attempt may still
				// be too slow (ErrUnavailable), and Acquire tries again.
				l, err := lk.Acquire(ctx, key(t), lockswap.WithTTL(ttl))
				if err != nil {
					t.Fatalf("Acquire before the fault: %v", err)
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
				probe := StartLagProbe()
				begin := time.Now()
				lk.Close()
				d := time.Since(begin)
				probe.Stop()
				if allowed := time.Second + probe.Extra(); d > allowed {
					t.Errorf("Close under %s took %v, want at most 1s (allowed %v with scheduling lags up to %v measured meanwhile)",
						f.Name, d.Round(time.Millisecond), allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond))
				}
				o.add(f.Name+"/Close (duration)", time.Since(begin))
			})
		})
	}
}
