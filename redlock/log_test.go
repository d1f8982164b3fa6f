package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestLogQuarantine: with RestartSafety, fresh instances put Acquire in a
// wait nobody asked for: it is logged once, however many calls meet it,
// with the reason, the time left and whether Acquire must wait; an
// instance restarted without its data later is a new quarantine, logged
// once more. Ordinary use logs nothing else.
func TestLogQuarantine(t *testing.T) {
	const maxTTL = 800 * time.Millisecond
	addrs, srvs := realN(t, 3)
	ctx := ctxT(t)
	rec := logtest.New()
	lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{RestartSafety: true, MaxTTL: maxTTL, Logger: rec.Logger()})
	retry := lockswap.WithRetry(lockswap.ConstantRetry(20 * time.Millisecond))

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lk.Acquire(ctx, "k"+string(rune('a'+i)), lockswap.WithTTL(200*time.Millisecond), retry)
			if err != nil {
				t.Error(err)
				return
			}
			l.Release(ctx)
		}()
	}
	wg.Wait()
	got := rec.Find(redlock.MsgQuarantine)
	if len(got) != 1 || len(rec.Records()) != 1 {
		t.Fatalf("records %v, want one %q for the first use of 3 fresh instances by 4 calls", rec.Records(), redlock.MsgQuarantine)
	}
	r := got[0]
	if r.Level != slog.LevelWarn || r.String("backend") != "redlock" || r.String("reason") == "" {
		t.Errorf("record %v: want WARN, backend redlock, a reason", r)
	}
	if left := r.Attrs["left"].Duration(); left <= 0 || left > maxTTL+100*time.Millisecond {
		t.Errorf("left = %v, want within MaxTTL %v", left, maxTTL)
	}
	want := map[string]int64{"quarantined": 3, "of": 3, "quorum": 2}
	for k, v := range want {
		if got := r.Attrs[k].Int64(); got != v {
			t.Errorf("%s = %d, want %d", k, got, v)
		}
	}
	if !r.Attrs["acquire_waits"].Bool() {
		t.Error("acquire_waits = false with every instance in quarantine")
	}
	if n := len(r.Attrs["instances"].Any().([]string)); n != 3 {
		t.Errorf("instances = %v, want the 3 servers", r.Attrs["instances"])
	}

	// Out of quarantine: nothing more is logged.
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if n := len(rec.Records()); n != 1 {
		t.Fatalf("records after the quarantine: %v", rec.Records())
	}

	// One instance restarts without its data: a new, smaller quarantine,
	// which does not make Acquire wait.
	if err := srvs[0].Restart(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(200*time.Millisecond), retry)
		if err != nil && !errors.Is(err, lockswap.ErrUnavailable) {
			t.Fatal(err)
		}
		if err == nil {
			l.Release(ctx)
		}
	}
	got = rec.Find(redlock.MsgQuarantine)
	if len(got) != 2 {
		t.Fatalf("%d quarantine records after a restart, want 2: %v", len(got), rec.Records())
	}
	r = got[1]
	if q := r.Attrs["quarantined"].Int64(); q != 1 || r.Attrs["acquire_waits"].Bool() {
		t.Errorf("after one restart: quarantined = %d, acquire_waits = %v; want 1, false", q, r.Attrs["acquire_waits"].Bool())
	}
	if inst := r.Attrs["instances"].Any().([]string); len(inst) != 1 {
		t.Errorf("instances = %v, want the restarted one", inst)
	}
}

// TestLogReleaseGaveUp: a release that two of three instances never answer
// goes on in the background, and when it gives up the record says how
// many instances keep the lock and for how long at most.
func TestLogReleaseGaveUp(t *testing.T) {
	addrs, _ := realN(t, 3)
	proxies := make([]string, len(addrs))
	ps := make([]*testserver.Proxy, len(addrs))
	for i, a := range addrs {
		ps[i] = testserver.ProxyT(t, a)
		proxies[i] = ps[i].Addr()
	}
	ctx := ctxT(t)
	rec := logtest.New()
	lk := newLocker(t, proxies, redistest.GoRedis, redlock.Options{Logger: rec.Logger(), LogKeys: true, Prefix: "app:"})
	l, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ps[1].Blackhole(true)
	ps[2].Blackhole(true)
	defer ps[1].Blackhole(false)
	defer ps[2].Blackhole(false)
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := l.Release(rctx); err == nil {
		t.Fatal("Release with 2 of 3 instances cut off succeeded")
	}
	r := rec.Wait(t, redlock.MsgReleaseGaveUp, 10*time.Second)
	if r.Level != slog.LevelWarn || r.String("backend") != "redlock" || r.String("key") != "app:job" {
		t.Errorf("record %v: want WARN, backend redlock, key app:job", r)
	}
	if u, of := r.Attrs["unanswered"].Int64(), r.Attrs["of"].Int64(); u != 2 || of != 3 {
		t.Errorf("unanswered %d of %d, want 2 of 3", u, of)
	}
	if d := r.Attrs["expires_within"].Duration(); d != time.Minute {
		t.Errorf("expires_within = %v, want the TTL 1m", d)
	}
	if n := len(rec.Records()); n != 1 {
		t.Errorf("records %v, want only the give-up", rec.Records())
	}
}
