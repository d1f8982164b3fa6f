package migrate_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/migrate"
)

// TestLogLegacyNet: in PhaseTarget with the safety net, a forgotten old
// client holding the legacy lock is logged (the attempt fails with
// ErrHeld); ordinary contention between new clients is not.
func TestLogLegacyNet(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, keys := range []bool{false, true} {
		rec := logtest.New()
		lk := mustNew(t, migrate.Options{Phase: migrate.PhaseTarget, Legacy: r.legacy(t), Target: r.target(t),
			LegacyNet: true, Logger: rec.Logger(), LogKeys: keys})

		held, err := lk.TryAcquire(ctx, "report", lockswap.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TryAcquire(ctx, "report", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("second new client: %v, want ErrHeld", err)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(rec.Records()); n != 0 {
			t.Fatalf("contention between new clients logged %v", rec.Records())
		}

		expiry, ok := r.old.acquire(ctx, "lock.report")
		if !ok {
			t.Fatal("the old client could not take the free legacy lock")
		}
		if _, err := lk.TryAcquire(ctx, "report", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("new client while an old one holds the legacy lock: %v, want ErrHeld", err)
		}
		r.old.release(ctx, "lock.report", expiry)
		got := rec.Find(migrate.MsgLegacyNet)
		if len(got) != 1 || len(rec.Records()) != 1 {
			t.Fatalf("records %v, want one %q", rec.Records(), migrate.MsgLegacyNet)
		}
		rr := got[0]
		if rr.Level != slog.LevelWarn || rr.String("backend") != "migrate" || rr.String("phase") != "target" || rr.String("reason") == "" {
			t.Errorf("record %v: want WARN, backend migrate, phase target, a reason", rr)
		}
		if k, has := rr.String("key"), rr.Has("key"); keys != has || (keys && k != "report") {
			t.Errorf("key attribute %q (present %v) with LogKeys=%v", k, has, keys)
		}
	}
}
