package etcdlease

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestLogLockLost: a lock whose key another client deletes is lost (its
// watch sees the delete), and a Locker with a Logger says so once, with
// the backend and the reason, and without the key unless LogKeys is set.
func TestLogLockLost(t *testing.T) {
	srv := testserver.EtcdT(t)
	for _, logKeys := range []bool{false, true} {
		rec := logtest.New()
		lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "log/", Logger: rec.Logger(), LogKeys: logKeys})
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t, 20*time.Second)
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Records(); len(got) != 0 {
			t.Fatalf("records after an ordinary acquire: %v, want none", got)
		}
		key, ok := EtcdKey(l)
		if !ok {
			t.Fatal("EtcdKey: not an etcdlease lock")
		}
		if _, err := benchClient(t, srv.Endpoints()).Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, l.Done(), 10*time.Second, "Done after the key was deleted")
		r := rec.Wait(t, driver.MsgLockLost, 10*time.Second)
		if r.Level.String() != "WARN" || r.String("backend") != Backend || r.String("reason") != driver.ReasonDriverLost {
			t.Errorf("record %+v: want WARN, backend %s, reason %q", r, Backend, driver.ReasonDriverLost)
		}
		if r.Has("key") != logKeys {
			t.Errorf("LogKeys %v: record has key = %v", logKeys, r.Has("key"))
		}
		_ = l.Release(ctx)
		if n := len(rec.Find(driver.MsgLockLost)); n != 1 {
			t.Errorf("%d %q records for one lock, want 1", n, driver.MsgLockLost)
		}
		lk.Close()
	}
}

// TestLogQuietAtClose: Close revokes the leases of the locks still held,
// which ends them; that is a shutdown, and nothing is logged.
func TestLogQuietAtClose(t *testing.T) {
	srv := testserver.EtcdT(t)
	rec := logtest.New()
	lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "logclose/", Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lk.Close()
	waitClosed(t, l.Done(), 5*time.Second, "Done after Close revoked the lease")
	_ = l.Release(ctx)
	if got := rec.Records(); len(got) != 0 {
		t.Fatalf("records after Close ended a held lock: %v, want none", got)
	}
}
