package migrate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/memlock"
	"github.com/lockswap/lockswap/migrate"
)

func mustNew(t *testing.T, o migrate.Options) *migrate.Locker {
	t.Helper()
	lk, err := migrate.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// TestConformanceEachPhase: the migration Locker is a Locker like the
// others in every phase (here over in-process stores; migrate_redis_test.go
// runs it over legacysetnx and singleredis on redis-server).
func TestConformanceEachPhase(t *testing.T) {
	for _, phase := range []migrate.Phase{migrate.PhaseLegacy, migrate.PhaseDual, migrate.PhaseTarget} {
		t.Run(phase.String(), func(t *testing.T) {
			legacy, target := memlock.NewStore(), memlock.NewStore()
			conformance.Run(t, conformance.Harness{
				NewLocker: func(t *testing.T) lockswap.Locker {
					return mustNew(t, migrate.Options{Phase: phase, Legacy: memlock.New(legacy), Target: memlock.New(target)})
				},
				TTL: 200 * time.Millisecond,
				NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
					lk, err := migrate.New(migrate.Options{Phase: phase, Legacy: memlock.New(legacy), Target: memlock.New(target), TTL: ttl})
					if err != nil {
						return nil, err
					}
					return lk, nil
				},
			})
		})
	}
}

func TestDualReleasesLegacyWhenTargetFails(t *testing.T) {
	legacy, target := memlock.NewStore(), memlock.NewStore()
	ctx := context.Background()
	dual := mustNew(t, migrate.Options{Phase: migrate.PhaseDual, Legacy: memlock.New(legacy), Target: memlock.New(target)})
	targetOnly := memlock.New(target)
	tl, err := targetOnly.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dual.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("dual TryAcquire while a target client holds: %v, want ErrHeld", err)
	}
	// The legacy lock the dual client took first was released again.
	ll, err := memlock.New(legacy).TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("legacy lock left behind after the dual client's target lock failed: %v", err)
	}
	ll.Release(ctx)
	tl.Release(ctx)
}

func TestDualOrderAndReverseRelease(t *testing.T) {
	legacy, target := memlock.NewStore(), memlock.NewStore()
	ctx := context.Background()
	dual := mustNew(t, migrate.Options{Phase: migrate.PhaseDual, Legacy: memlock.New(legacy), Target: memlock.New(target),
		LegacyKey: func(k string) string { return "legacy-" + k }})
	l, err := dual.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	// Both locks are held, each under its own name.
	if _, err := memlock.New(legacy).TryAcquire(ctx, "legacy-job"); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("legacy lock not held under the mapped name: %v", err)
	}
	if _, err := memlock.New(target).TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("target lock not held: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*memlock.Store{"legacy-job": legacy, "job": target} {
		x, err := memlock.New(s).TryAcquire(ctx, name)
		if err != nil {
			t.Errorf("%s still held after Release: %v", name, err)
			continue
		}
		x.Release(ctx)
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	m := memlock.New(memlock.NewStore())
	for name, o := range map[string]migrate.Options{
		"no phase":            {Legacy: m, Target: m},
		"dual without target": {Phase: migrate.PhaseDual, Legacy: m},
		"legacy without lock": {Phase: migrate.PhaseLegacy, Target: m},
		"target without lock": {Phase: migrate.PhaseTarget, Legacy: m},
	} {
		if _, err := migrate.New(o); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := migrate.ParsePhase("halfway"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("ParsePhase(halfway) = %v", err)
	}
	if p, err := migrate.ParsePhase("Dual"); err != nil || p != migrate.PhaseDual {
		t.Errorf("ParsePhase(Dual) = %v, %v", p, err)
	}
}

// declared is a Locker with the Guarantees a test gives it.
type declared struct {
	lockswap.Locker
	g lockswap.Guarantees
}

func (d declared) Guarantees() lockswap.Guarantees { return d.g }

func TestGuaranteesPerPhase(t *testing.T) {
	legacy := declared{memlock.New(memlock.NewStore()), lockswap.Guarantees{Backend: "legacysetnx",
		Clock: lockswap.ClockSynchronized, Nodes: 1, StaleReleaseSafe: true, Wait: lockswap.WaitPoll}}
	target := declared{memlock.New(memlock.NewStore()), lockswap.Guarantees{Backend: "etcdlease", Fencing: true,
		SurvivesFailover: true, SurvivesRestart: true, Clock: lockswap.ClockNone, Nodes: 3, Tolerates: 1,
		StaleReleaseSafe: true, Wait: lockswap.WaitQueue}}
	for _, c := range []struct {
		phase migrate.Phase
		net   bool
		want  lockswap.Guarantees
	}{
		{migrate.PhaseLegacy, false, lockswap.Guarantees{Clock: lockswap.ClockSynchronized, Wait: lockswap.WaitPoll}},
		{migrate.PhaseTarget, false, lockswap.Guarantees{Fencing: true, SurvivesFailover: true, SurvivesRestart: true,
			Tolerates: 1, Wait: lockswap.WaitQueue}},
		// Two locks: a property holds only if both locks have it.
		{migrate.PhaseDual, false, lockswap.Guarantees{Fencing: true, Clock: lockswap.ClockSynchronized, Wait: lockswap.WaitPoll}},
		{migrate.PhaseTarget, true, lockswap.Guarantees{Fencing: true, Clock: lockswap.ClockSynchronized, Wait: lockswap.WaitPoll}},
	} {
		lk := mustNew(t, migrate.Options{Phase: c.phase, Legacy: legacy, Target: target, LegacyNet: c.net})
		g := lk.Guarantees()
		if g.Fencing != c.want.Fencing || g.SurvivesFailover != c.want.SurvivesFailover || g.SurvivesRestart != c.want.SurvivesRestart ||
			g.Clock != c.want.Clock || g.Tolerates != c.want.Tolerates || g.Wait != c.want.Wait || !g.StaleReleaseSafe {
			t.Errorf("%v (net %v): guarantees %+v, want %+v", c.phase, c.net, g, c.want)
		}
	}
}
