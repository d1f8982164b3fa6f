package migrate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/memlock"
	"github.com/lockswap/lockswap/migrate"
)

// TestDualCountsBothBackends: migrate passes the call's context to its
// backends, so a counter (driver.CountAttempts, what lockswap/otel
// records) counts the attempts of both in the dual phase, and only the
// legacy one when the legacy lock is held (the target is not asked).
func TestDualCountsBothBackends(t *testing.T) {
	legacy, target := memlock.NewStore(), memlock.NewStore()
	dual := mustNew(t, migrate.Options{Phase: migrate.PhaseDual, Legacy: memlock.New(legacy), Target: memlock.New(target)})
	defer dual.Close()
	ctx, n := driver.CountAttempts(context.Background())
	l, err := dual.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if c := n.Load(); c != 2 {
		t.Errorf("dual TryAcquire counted %d attempts, want 2 (legacy and target)", c)
	}
	ctx, n = driver.CountAttempts(context.Background())
	if _, err := dual.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("dual TryAcquire of a held key: %v, want ErrHeld", err)
	}
	if c := n.Load(); c != 1 {
		t.Errorf("dual TryAcquire that the legacy lock refused counted %d attempts, want 1", c)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
