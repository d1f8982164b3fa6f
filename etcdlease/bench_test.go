package etcdlease

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
)

// benchClient is a raw client to endpoints, closed at cleanup.
func benchClient(b testing.TB, endpoints []string) *clientv3.Client {
	b.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatalf("etcd client: %v", err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkCycle is one uncontended acquire + release, serially, on one
// embedded etcd: lockswap's etcd lock, etcd's own concurrency.Mutex with a
// reused session, the lease-per-lock alternative (grant, put, delete,
// revoke), and the raw floor (one put-if-absent transaction and one delete).
func BenchmarkCycle(b *testing.B) {
	srv := testserver.EtcdT(b)
	ctx := context.Background()
	c := benchClient(b, srv.Endpoints())
	b.Run("lockswap", func(b *testing.B) {
		lk, err := New(c, Options{Prefix: "bench/lockswap/"})
		if err != nil {
			b.Fatal(err)
		}
		defer lk.Close()
		if l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second)); err == nil {
			l.Release(ctx) // grant the lease outside the timing
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mutex", func(b *testing.B) {
		s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m := concurrency.NewMutex(s, "bench/mutex/k")
			if err := m.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("leaseperlock", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			g, err := c.Grant(ctx, 10)
			if err != nil {
				b.Fatal(err)
			}
			k := "bench/perlock/k"
			r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "", clientv3.WithLease(g.ID))).Commit()
			if err != nil || !r.Succeeded {
				b.Fatal(err, r.Succeeded)
			}
			if _, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", r.Header.Revision)).
				Then(clientv3.OpDelete(k)).Commit(); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Revoke(ctx, g.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		k := "bench/raw/k"
		for i := 0; i < b.N; i++ {
			r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, "")).Commit()
			if err != nil || !r.Succeeded {
				b.Fatal(err, r.Succeeded)
			}
			if _, err := c.Delete(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCycleVsMutex alternates one lockswap cycle and one
// concurrency.Mutex cycle (reused session) on the same server and client,
// so that both see the same load; it reports each one's median and the
// ratio of the medians (lockswap ÷ Mutex), which shared-machine noise
// moves far less than separate runs.
func BenchmarkCycleVsMutex(b *testing.B) {
	srv := testserver.EtcdT(b)
	ctx := context.Background()
	c := benchClient(b, srv.Endpoints())
	lk, err := New(c, Options{Prefix: "benchvs/lockswap/"})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Close()
	s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second)); err == nil {
		l.Release(ctx)
	}
	ls := make([]time.Duration, 0, b.N)
	mx := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		m := concurrency.NewMutex(s, "benchvs/mutex/k")
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		mx = append(mx, t1.Sub(t0))
		ls = append(ls, t2.Sub(t1))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	ml, mm := med(ls), med(mx)
	b.ReportMetric(ml, "lockswap-ns/cycle")
	b.ReportMetric(mm, "mutex-ns/cycle")
	b.ReportMetric(ml/mm, "ratio")
}

// BenchmarkContended8 runs 8 goroutines that take and release one key,
// b.N acquisitions in all, and reports acquisitions per second and fairness
// (fewest ÷ most acquisitions per goroutine).
func BenchmarkContended8(b *testing.B) {
	srv := testserver.EtcdT(b)
	ctx := context.Background()
	c := benchClient(b, srv.Endpoints())
	const workers = 8
	run := func(b *testing.B, cycle func(w int) error) {
		var left atomic.Int64
		left.Store(int64(b.N))
		counts := make([]int, workers)
		var wg sync.WaitGroup
		var failed atomic.Value
		b.ResetTimer()
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := cycle(w); err != nil {
						failed.Store(err)
						return
					}
					counts[w]++
				}
			}(w)
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		lo, hi := counts[0], counts[0]
		for _, n := range counts {
			lo, hi = min(lo, n), max(hi, n)
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
		if hi > 0 {
			b.ReportMetric(float64(lo)/float64(hi), "fairness")
		}
	}
	b.Run("lockswap", func(b *testing.B) {
		lk, err := New(c, Options{Prefix: fmt.Sprintf("bench8/lockswap/%d/", b.N)})
		if err != nil {
			b.Fatal(err)
		}
		defer lk.Close()
		run(b, func(int) error {
			l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				return err
			}
			return l.Release(ctx)
		})
	})
	b.Run("mutex", func(b *testing.B) {
		sessions := make([]*concurrency.Session, workers)
		for w := range sessions {
			s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sessions[w] = s
		}
		pfx := fmt.Sprintf("bench8/mutex/%d/k", b.N)
		run(b, func(w int) error {
			m := concurrency.NewMutex(sessions[w], pfx)
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		})
	})
}
