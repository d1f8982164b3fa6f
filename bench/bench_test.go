// Package bench compares lockswap's backends with the other Go lock
// libraries and with raw-client floors, in one run, on the same servers.
//
// It is a separate module so that the other libraries never enter
// lockswap's go.mod. Run it through bench/run.sh, which starts five
// redis-servers, runs BenchmarkLocks with -count 5 and writes the markdown
// table; the embedded etcd is started here.
//
// BenchmarkLocks/<scenario>/<group>/<impl>:
//
//   - scenario serial: one goroutine, distinct keys (latency);
//     parallel: 32 goroutines, distinct keys (throughput);
//     contended: 8 goroutines on one key (acquisitions per second, fairness).
//   - group redis1 (one redis-server), redlock3 and redlock5 (3 and 5
//     independent redis-servers), etcd (one embedded etcd member).
//
// One op is one acquisition followed by its release, done with the call a
// user makes to wait for a lock (Acquire, Lock, Obtain with retry). In the
// contended scenario the holder does a tiny, identical piece of work in
// every library: it checks that nobody else holds the lock (an atomic flag,
// failing the benchmark on overlap) and counts the acquisition; between
// release and the next acquire it does nothing.
//
// Besides ns/op and allocs/op every benchmark reports p50-ns and p99-ns
// (the latency of one acquire+release, waiting included), and the contended
// scenario acq/s and fairness (fewest ÷ most acquisitions per goroutine).
package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redisscript"
)

const (
	ttl     = 10 * time.Second
	keyRing = 256 // distinct keys per goroutine
)

// The raw floors release with the script lockswap's Redis backends run.
var (
	releaseSrc = redisscript.CompareAndDelete.Source()
	releaseSHA = redisscript.CompareAndDelete.SHA()
)

// cycleFunc waits for the lock on key, calls hold (when not nil) while
// holding it, and releases it.
type cycleFunc func(ctx context.Context, key string, hold func() error) error

// impl is one library (or floor) in a group. newCycle is called once per
// goroutine before the timer starts (sessions, dedicated connections).
type impl struct {
	name     string
	newCycle func(b *testing.B) cycleFunc
}

// contendedOnly names the impls that run in the contended scenario only:
// variants that differ from another impl only in how they wait, which
// distinct keys never do.
var contendedOnly = map[string]bool{"redsync-redigo-defaultretry": true}

type scenario struct {
	name       string
	goroutines int
	contended  bool
}

var scenarios = []scenario{
	{"serial", 1, false},
	{"parallel", 32, false},
	{"contended", 8, true},
}

type group struct {
	name  string
	impls []impl
}

func groups(b *testing.B, s *servers) []group {
	return []group{
		{"redis1", redis1Impls(b, s)},
		{"redlock3", redlockImpls(b, s, 3)},
		{"redlock5", redlockImpls(b, s, 5)},
		{"etcd", etcdImpls(b, s)},
	}
}

// BenchmarkLocks runs every scenario for every group and library. With
// -count n the whole set runs n times, so that the libraries of a group
// alternate in time and share whatever load the machine has.
func BenchmarkLocks(b *testing.B) {
	s := shared(b)
	gs := groups(b, s)
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			for _, g := range gs {
				b.Run(g.name, func(b *testing.B) {
					for _, im := range g.impls {
						if contendedOnly[im.name] && !sc.contended {
							continue
						}
						b.Run(im.name, func(b *testing.B) { runScenario(b, sc, g.name, im) })
					}
				})
			}
		})
	}
}

var runSeq atomic.Int64

// runScenario runs b.N acquire+release cycles spread over the scenario's
// goroutines (each takes the next op number from a shared counter) and
// reports the latency percentiles, and for the contended scenario the
// acquisition rate and fairness.
func runScenario(b *testing.B, sc scenario, groupName string, im impl) {
	ctx := context.Background()
	run := runSeq.Add(1)
	cycles := make([]cycleFunc, sc.goroutines)
	keys := make([][]string, sc.goroutines)
	for g := range cycles {
		cycles[g] = im.newCycle(b)
		if sc.contended {
			keys[g] = []string{fmt.Sprintf("bench:%s:%s:contended:%d", groupName, im.name, run)}
			continue
		}
		keys[g] = make([]string, keyRing)
		for i := range keys[g] {
			keys[g][i] = fmt.Sprintf("bench:%s:%s:%d:%d:%d", groupName, im.name, run, g, i)
		}
	}
	lat := make([]time.Duration, b.N)
	counts := make([]int, sc.goroutines)
	var (
		next    atomic.Int64
		holders atomic.Int32
		failed  atomic.Pointer[error]
		wg      sync.WaitGroup
	)
	var hold func() error
	if sc.contended {
		hold = func() error {
			if n := holders.Add(1); n != 1 {
				return fmt.Errorf("%s: %d holders of one lock at once", im.name, n)
			}
			holders.Add(-1)
			return nil
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range cycles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cycle, ks := cycles[g], keys[g]
			for j := 0; ; j++ {
				i := next.Add(1) - 1
				if i >= int64(b.N) || failed.Load() != nil {
					return
				}
				t0 := time.Now()
				if err := cycle(ctx, ks[j%len(ks)], hold); err != nil {
					failed.Store(&err)
					return
				}
				lat[i] = time.Since(t0)
				counts[g]++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)].Nanoseconds()), "p99-ns")
	if sc.contended {
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
		lo, hi := slices.Min(counts), slices.Max(counts)
		if hi > 0 && b.N >= 2*sc.goroutines {
			// Fairness needs a few turns per goroutine (Mutex manages ~80/s).
			b.ReportMetric(float64(lo)/float64(hi), "fairness")
		}
	}
}
