package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesistest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestHistoryUnderNemesis runs three fenced, restart-safe Redlock clients
// over three masters through the recorded-increment workload (package
// history) while a seeded nemesis (internal/nemesistest) injects one fault
// at a time: a master paused (SIGSTOP), restarted without its data, slowed
// or cut off by its proxy; and one section in ten pauses its holder until
// its lock has ended and up to half a TTL more. Within Redlock's assumptions (one master at a time)
// the history must be linearizable and the fences must rise and never
// repeat: a holder that paused past its lock is stopped by its fence.
// -nemesis.seed replays a schedule, -nemesis.for runs longer (default 3 s);
// a failure writes the history and Porcupine's view to a temporary folder.
func TestHistoryUnderNemesis(t *testing.T) {
	addrs, srvs := realN(t, 3)
	raws := rawClients(t, addrs)
	seedOldEpoch(t, raws)
	proxies := make([]*testserver.Proxy, len(addrs))
	via := make([]string, len(addrs))
	for i, a := range addrs {
		proxies[i] = testserver.ProxyT(t, a)
		via[i] = proxies[i].Addr()
	}
	const ttl = time.Second
	var lks []lockswap.Locker
	for range 3 {
		lks = append(lks, newLocker(t, via, redistest.GoRedis, redlock.Options{Fence: true, RestartSafety: true,
			MaxTTL: 2 * time.Second, TTL: ttl, InstanceTimeout: adaptiveTimeout, MasterNames: []string{"a", "b", "c"}}))
	}
	var faults []nemesistest.Fault
	for i := range srvs {
		s, p := srvs[i], proxies[i]
		faults = append(faults,
			nemesistest.Fault{Name: fmt.Sprintf("pause master %d", i), Inject: func() (func(), error) { return s.Resume, s.Pause() }},
			nemesistest.Fault{Name: fmt.Sprintf("restart master %d without its data", i), Inject: func() (func(), error) { return nil, s.Restart() }},
			nemesistest.Fault{Name: fmt.Sprintf("delay master %d by 20 ms", i), Inject: func() (func(), error) {
				p.SetDelay(20 * time.Millisecond)
				return func() { p.SetDelay(0) }, nil
			}},
			nemesistest.Fault{Name: fmt.Sprintf("cut master %d off", i), Inject: func() (func(), error) {
				p.Blackhole(true)
				return func() { p.Blackhole(false) }, nil
			}},
		)
	}
	seed := nemesistest.Seed()
	r := nemesistest.Rand(seed)
	ctx, cancel := context.WithTimeout(ctxT(t), nemesistest.Duration(3*time.Second))
	defer cancel()
	rec, reg := history.NewRecorder(), history.NewRegister(true)
	done := make(chan []nemesistest.Event)
	go func() {
		done <- nemesistest.Schedule{Faults: faults, MaxHold: 500 * time.Millisecond, MaxGap: 300 * time.Millisecond, Seed: seed}.Run(ctx, t)
	}()
	err := history.Workload{Lockers: lks, Keys: []string{"a", "b"}, Sections: 1 << 30, TTL: ttl, Register: reg, Recorder: rec,
		Between: func(ctx context.Context, _ int, l lockswap.Lock) {
			if r.IntN(10) != 0 {
				return
			}
			// The holder pauses until its lock has ended, and up to half a
			// TTL more (a GC pause, a stalled VM): the fault itself.
			select {
			case <-l.Done():
			case <-ctx.Done():
				return
			}
			tm := time.NewTimer(time.Duration(r.IntN(500)) * time.Millisecond)
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-ctx.Done():
			}
		}}.Run(ctx)
	<-done
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the workload ended with %v, want its deadline", err)
	}
	ops := rec.Ops()
	res, err := history.Check(ops, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var late, rejected int
	for _, op := range ops {
		if op.Late {
			late++
		}
		if !op.Wrote {
			rejected++
		}
	}
	t.Logf("%d sections, %d outlived their lock, %d rejected by their fence", len(ops), late, rejected)
	if len(ops) < 3 { // a busy machine and the faults slow it, but some must run
		t.Errorf("only %d sections ran", len(ops))
	}
	if !res.Linearizable || res.Fences != nil {
		dir := t.TempDir()
		if keep, err := os.MkdirTemp("", "lockswap-nemesis-"); err == nil {
			dir = keep
		}
		var buf bytes.Buffer
		history.WriteJSONL(&buf, ops)
		os.WriteFile(filepath.Join(dir, "history.jsonl"), buf.Bytes(), 0o644)
		for _, k := range res.Violations {
			if f, err := os.Create(filepath.Join(dir, k+".html")); err == nil {
				res.Visualize(k, f)
				f.Close()
			}
		}
		t.Fatalf("seed %d: violations on %q, undecided %q, fences %q; history and views in %s", seed, res.Violations, res.Unknown, res.Fences, dir)
	}
}
