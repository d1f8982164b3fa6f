package compare

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/servers"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Backends  []string
	Duration  time.Duration // per measurement (default 1s)
	Miniredis bool
	Progress  io.Writer
}

// BenchRow is one backend in one mode.
type BenchRow struct {
	Backend  string
	Mode     string // serial, parallel (16 goroutines, distinct keys), contended (8 goroutines, one key)
	Ops      int
	PerSec   float64
	P50, P99 time.Duration
	Fairness float64 // contended: fewest ÷ most acquisitions per goroutine
	Err      string
}

// Bench measures acquire+release cycles per backend on the same kind of
// servers compare starts.
func Bench(ctx context.Context, o BenchOptions) ([]BenchRow, string, error) {
	if o.Duration <= 0 {
		o.Duration = time.Second
	}
	e := &env{}
	_, hasRedis := servers.RedisServerPath()
	e.real = hasRedis && !o.Miniredis
	envDesc := "real redis-server processes; embedded etcd"
	if !e.real {
		envDesc = "miniredis (in-process fake: not representative of real latency); embedded etcd"
	}
	var rows []BenchRow
	for _, k := range kits {
		if len(o.Backends) > 0 && !contains(o.Backends, k.name) {
			continue
		}
		f, err := k.setup(ctx, e, ScContention)
		if err != nil {
			rows = append(rows, BenchRow{Backend: k.name, Mode: "all", Err: err.Error()})
			continue
		}
		for _, shape := range benchShapes {
			progress(o.Progress, "bench %s %s ...", k.name, shape.Name)
			row := benchMode(ctx, f, shape, o.Duration)
			row.Backend = k.name
			rows = append(rows, row)
		}
		f.close()
	}
	return rows, envDesc, nil
}

// benchShapes are the modes Bench measures, in the shapes of
// internal/benchloop, which the benchmarks in the repository use too.
var benchShapes = []benchloop.Shape{benchloop.Serial, benchloop.Parallel(16), benchloop.Contended(8)}

// benchMode runs Acquire+Release cycles in shape for d on one Locker of f.
// A cycle still waiting at the end gets a second more.
func benchMode(ctx context.Context, f *fixture, shape benchloop.Shape, d time.Duration) BenchRow {
	lk, err := f.locker(f.newLocker)
	if err != nil {
		return BenchRow{Mode: shape.Name, Err: err.Error()}
	}
	ttl := max(10*time.Second, f.ttl)
	loop := benchloop.Loop{Shape: shape, NewCycle: func() benchloop.Cycle { return benchloop.AcquireCycle(lk, ttl) }, Latency: true}
	r, err := loop.For(ctx, d, time.Second)
	row := BenchRow{Mode: shape.Name, Ops: r.Ops, PerSec: r.PerSec(), P50: r.Percentile(50), P99: r.Percentile(99)}
	if err != nil {
		row.Err = err.Error()
	}
	if shape.OneKey {
		row.Fairness, _ = r.Fairness()
	}
	return row
}

// BenchLegend explains WriteBench's columns and modes, under its table
// and in `lockswap bench -h`.
const BenchLegend = `OPS/S: acquire+release cycles per second. P50, P99: the latency of one cycle
(Acquire, then Release). FAIRNESS, contended only: the fewest acquisitions of one
goroutine divided by the most (1.00: all got their turn; 0: one got none).
Modes: serial, one goroutine; parallel, 16 goroutines on keys of their own;
contended, 8 goroutines on one key.`

// WriteBench writes bench rows as a table, followed by BenchLegend and
// the measurements that failed, one line each. It returns an error when
// one did: a missing row is not a slow one.
func WriteBench(w io.Writer, rows []BenchRow, envDesc string) error {
	fmt.Fprintf(w, "environment: %s\n\n", envDesc)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tMODE\tOPS/S\tP50\tP99\tFAIRNESS")
	var failed []BenchRow
	for _, r := range rows {
		if r.Err != "" {
			failed = append(failed, r)
			fmt.Fprintf(tw, "%s\t%s\tfailed\t-\t-\t-\n", r.Backend, r.Mode)
			continue
		}
		fair := "-"
		if r.Mode == "contended" {
			fair = fmt.Sprintf("%.2f", r.Fairness)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%v\t%v\t%s\n", r.Backend, r.Mode, r.PerSec,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), fair)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%s\n", BenchLegend); err != nil {
		return err
	}
	for _, r := range failed {
		if _, err := fmt.Fprintf(w, "failed: %s %s: %s\n", r.Backend, r.Mode, r.Err); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench: %d of %d measurements failed (listed after the table)", len(failed), len(rows))
	}
	return nil
}
