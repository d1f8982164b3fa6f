// Package bench compares lockswap's backends with the other Go lock
// libraries and with raw-client floors, in one run, on the same servers.
//
// It is a separate module so that the other libraries never enter
// lockswap's go.mod. Run it through bench/run.sh, which starts five
// redis-servers, runs BenchmarkLocks with -count 4 (and the cross-process
// TestProcesses, then BenchmarkTurns, paired_test.go) and writes the
// markdown table; the embedded etcd is started here.
//
// BenchmarkLocks/<scenario>/<group>/<impl>:
//
//   - scenario (the loop shapes of internal/benchloop) serial: one
//     goroutine, distinct keys (latency);
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
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/redisscript"
)

const ttl = 10 * time.Second

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

// scenarios are the loop shapes every library runs.
var scenarios = []benchloop.Shape{benchloop.Serial, benchloop.Parallel(32), benchloop.Contended(8)}

type group struct {
	name  string
	impls []impl
	// redis are the servers whose INFO commandstats count the commands a
	// run sends (none for etcd).
	redis []*goredis.Client
}

func groups(b *testing.B, s *servers) []group {
	return []group{
		{"redis1", redis1Impls(b, s), s.goredis[:1]},
		{"redlock3", redlockImpls(b, s, 3), s.goredis[:3]},
		{"redlock5", redlockImpls(b, s, 5), s.goredis[:5]},
		{"etcd", etcdImpls(b, s), nil},
	}
}

// BenchmarkLocks runs every scenario for every group and library. With
// -count n the whole set runs n times, so that the libraries of a group
// alternate in time and share whatever load the machine has.
func BenchmarkLocks(b *testing.B) {
	s := shared(b)
	gs := groups(b, s)
	for _, sc := range scenarios {
		b.Run(sc.Name, func(b *testing.B) {
			for _, g := range gs {
				b.Run(g.name, func(b *testing.B) {
					for _, im := range g.impls {
						if contendedOnly[im.name] && !sc.OneKey {
							continue
						}
						b.Run(im.name, func(b *testing.B) { runScenario(b, sc, im, g.redis) })
					}
				})
			}
		})
	}
	b.Run(separate.Name, func(b *testing.B) {
		b.Run("redis1", func(b *testing.B) {
			for _, im := range separateImpls(s.redisAddrs[0]) {
				b.Run(im.name, func(b *testing.B) { runScenario(b, separate, im, s.goredis[:1]) })
			}
		})
	})
}

// runScenario runs b.N acquire+release cycles of im in the scenario's
// shape and reports the latency percentiles, and for the contended
// scenario the acquisition rate and fairness. In the contended scenario
// the holder checks that it is alone (failing the benchmark on overlap).
// With redis servers it reports the commands they ran per op (cmds/op,
// connection set-up included) and, contended, per goroutine and second
// (cmds/goroutine-s: a waiter's polling shows here). It reports the CPU
// time per op of this process (cpu-ns/op: the client's and library's
// work, whatever goroutine did it, and the kernel's for its system calls;
// the set-up of the cycles included) and of the servers (srv-cpu-ns/op,
// from INFO cpu): unlike ns/op, they do not count the time a cycle waits
// to be scheduled, so they show a difference of a few percent that the
// latency of a busy 2-core machine hides.
func runScenario(b *testing.B, sc benchloop.Shape, im impl, redis []*goredis.Client) {
	var hold func() error
	if sc.OneKey {
		var holders atomic.Int32
		hold = func() error {
			if n := holders.Add(1); n != 1 {
				return fmt.Errorf("%s: %d holders of one lock at once", im.name, n)
			}
			holders.Add(-1)
			return nil
		}
	}
	newCycle := func() benchloop.Cycle {
		cycle := im.newCycle(b)
		return func(ctx context.Context, key string) error { return cycle(ctx, key, hold) }
	}
	var before int64
	var srvBefore time.Duration
	if redis != nil {
		before, srvBefore = commandsOn(b, redis), serverCPUOn(b, redis)
	}
	cpuBefore, cpuOK := processCPU()
	r := benchloop.Loop{Shape: sc, NewCycle: newCycle, Latency: true}.Bench(b, b.N)
	if cpuAfter, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpuAfter-cpuBefore)/float64(b.N), "cpu-ns/op")
	}
	if redis != nil {
		srv := serverCPUOn(b, redis) - srvBefore
		n := float64(commandsOn(b, redis) - before)
		b.ReportMetric(n/float64(b.N), "cmds/op")
		b.ReportMetric(float64(srv)/float64(b.N), "srv-cpu-ns/op")
		if sc.OneKey {
			b.ReportMetric(n/r.Elapsed.Seconds()/float64(sc.Goroutines), "cmds/goroutine-s")
		}
	}
}
