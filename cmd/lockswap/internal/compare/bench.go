package compare

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lockswap/lockswap"
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
		for _, mode := range []string{"serial", "parallel", "contended"} {
			progress(o.Progress, "bench %s %s ...", k.name, mode)
			row := benchMode(ctx, f, mode, o.Duration)
			row.Backend = k.name
			rows = append(rows, row)
		}
		f.close()
	}
	return rows, envDesc, nil
}

func benchMode(ctx context.Context, f *fixture, mode string, d time.Duration) BenchRow {
	goroutines, sameKey := 1, false
	switch mode {
	case "parallel":
		goroutines = 16
	case "contended":
		goroutines, sameKey = 8, true
	}
	lk, err := f.locker(f.newLocker)
	if err != nil {
		return BenchRow{Mode: mode, Err: err.Error()}
	}
	ttl := 10 * time.Second
	if f.ttl > ttl {
		ttl = f.ttl
	}
	var mu sync.Mutex
	var lat []time.Duration
	counts := make([]int, goroutines)
	var firstErr error
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				key := fmt.Sprintf("bench-%s-%d-%d", mode, g, i)
				if sameKey {
					key = "bench-contended"
				}
				start := time.Now()
				actx, cancel := context.WithDeadline(ctx, end.Add(time.Second))
				l, err := lk.Acquire(actx, key, lockswap.WithTTL(ttl))
				cancel()
				if err != nil {
					if time.Now().Before(end) {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
					break
				}
				err = l.Release(ctx)
				mine = append(mine, time.Since(start))
				counts[g]++
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	row := BenchRow{Mode: mode, Ops: len(lat), PerSec: float64(len(lat)) / d.Seconds()}
	if firstErr != nil {
		row.Err = firstErr.Error()
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		row.P50 = lat[len(lat)/2]
		row.P99 = lat[len(lat)*99/100]
	}
	if sameKey {
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi > 0 {
			row.Fairness = float64(lo) / float64(hi)
		}
	}
	return row
}

// WriteBench writes bench rows as a table.
func WriteBench(w io.Writer, rows []BenchRow, envDesc string) error {
	fmt.Fprintf(w, "environment: %s\n\n", envDesc)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tMODE\tOPS/S\tP50\tP99\tFAIRNESS\tERROR")
	for _, r := range rows {
		fair := "-"
		if r.Mode == "contended" {
			fair = fmt.Sprintf("%.2f", r.Fairness)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%v\t%v\t%s\t%s\n", r.Backend, r.Mode, r.PerSec,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), fair, r.Err)
	}
	return tw.Flush()
}
