package nemesistest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/servers"
)

// PauseHolder returns a history.Workload Between hook that, in one
// section out of oneIn (drawn from r), pauses the holder until its lock
// has ended and up to maxExtra more: a GC pause or a stalled VM, the
// holder's own fault. The section's write then comes after its lock.
func PauseHolder(r *Locked, oneIn int, maxExtra time.Duration) func(context.Context, int, lockswap.Lock) {
	return func(ctx context.Context, _ int, l lockswap.Lock) {
		if r.IntN(oneIn) != 0 {
			return
		}
		select {
		case <-l.Done():
		case <-ctx.Done():
			return
		}
		tm := time.NewTimer(time.Duration(r.IntN(int(maxExtra/time.Millisecond)+1)) * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
		}
	}
}

// CheckHistory checks ops with package history (Porcupine, and the
// fences' order when the register checked them) and returns the result.
// It fails t when fewer than minSections sections ran (a busy machine and
// the faults slow a workload, but some must run) and, with wantSafe, when
// the history is not linearizable, could not be decided within a minute,
// or fences went backwards: then the seed, the history (JSON lines) and
// Porcupine's view of each failing key are written to a folder it names.
func CheckHistory(t testing.TB, seed uint64, ops []history.Op, minSections int, wantSafe bool) history.Result {
	t.Helper()
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
	if len(ops) < minSections {
		t.Errorf("only %d sections ran, want %d at least", len(ops), minSections)
	}
	if wantSafe && (!res.Linearizable || res.Unknown != nil || res.Fences != nil) {
		dir := SaveHistory(t, ops, res)
		t.Fatalf("seed %d: violations on %q, undecided %q, fences %q; history and views in %s", seed, res.Violations, res.Unknown, res.Fences, dir)
	}
	return res
}

// SaveHistory writes ops (history.jsonl) and Porcupine's view of each key
// res found in violation (<key>.html) to a new folder that outlives the
// test, and returns its path.
func SaveHistory(t testing.TB, ops []history.Op, res history.Result) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lockswap-nemesis-")
	if err != nil {
		dir = t.TempDir()
	}
	var buf bytes.Buffer
	if err := history.WriteJSONL(&buf, ops); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Error(err)
	}
	for _, k := range res.Violations {
		f, err := os.Create(filepath.Join(dir, k+".html"))
		if err != nil {
			t.Error(err)
			continue
		}
		res.Visualize(k, f)
		f.Close()
	}
	return dir
}

// RedisFaults are the faults of one redis-server, named name ("master 1"),
// that its clients reach through proxy p: paused (SIGSTOP), restarted
// without its data, slowed by 20 ms a reply, cut off.
func RedisFaults(name string, s *servers.Redis, p *servers.Proxy) []Fault {
	return append([]Fault{
		{Name: "pause " + name, Inject: func() (func(), error) { return s.Resume, s.Pause() }},
		{Name: "restart " + name + " without its data", Inject: func() (func(), error) { return nil, s.Restart() }},
	}, ProxyFaults(name, p)...)
}

// RunWorkload runs w beside the schedule s until ctx ends, and returns
// the history w recorded. It fails t when w stopped on an error before
// ctx ended (a workload error, not a verdict on the lock).
func RunWorkload(ctx context.Context, t testing.TB, s Schedule, w history.Workload) []history.Op {
	t.Helper()
	done := make(chan []Event)
	go func() { done <- s.Run(ctx, t) }()
	err := w.Run(ctx)
	<-done
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the workload ended with %v, want its deadline", err)
	}
	return w.Recorder.Ops()
}

// EtcdFaults are the faults of the etcd process e, named name, that its
// clients reach through proxy p: paused (SIGSTOP: its lease timers stop
// with it, and may expire holders' leases when it continues), slowed by
// 20 ms a reply, cut off.
func EtcdFaults(name string, e *servers.EtcdProcess, p *servers.Proxy) []Fault {
	return append([]Fault{
		{Name: "pause " + name, Inject: func() (func(), error) { return e.Resume, e.Pause() }},
	}, ProxyFaults(name, p)...)
}

// ProxyFaults are the faults of a server named name that stay on the
// clients' side of proxy p: its replies slowed by 20 ms, or cut off.
func ProxyFaults(name string, p *servers.Proxy) []Fault {
	return []Fault{
		{Name: "delay " + name + " by 20 ms", Inject: func() (func(), error) {
			p.SetDelay(20 * time.Millisecond)
			return func() { p.SetDelay(0) }, nil
		}},
		{Name: "cut " + name + " off", Inject: func() (func(), error) {
			p.Blackhole(true)
			return func() { p.Blackhole(false) }, nil
		}},
	}
}
