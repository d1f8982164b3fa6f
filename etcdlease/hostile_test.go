package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
)

// promise is what the tests allow a call past its deadline: the documented
// lockswap.DeadlineGrace (100 ms) plus a floor for the scheduling delays of
// a loaded machine running the race detector, as in the shared fault
// suite; timed takes the delays measured beyond it off the overrun.
const promise = conformance.Slack

// proxied starts an etcd and a proxy in front of it, and opens a Locker
// through the proxy with default options (but prefix); the Locker is
// closed at cleanup, after the proxy's faults are lifted.
func proxied(t *testing.T, prefix string, opts ...func(*Config)) (*testserver.Etcd, *testserver.Proxy, *Locker) {
	t.Helper()
	srv := testserver.EtcdT(t)
	proxy := testserver.ProxyT(t, strings.TrimPrefix(srv.Endpoints()[0], "http://"))
	cfg := Config{Endpoints: []string{proxy.Addr()}, Prefix: prefix}
	for _, o := range opts {
		o(&cfg)
	}
	lk, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.SetDelay(0)
		proxy.Blackhole(false)
		lk.Close()
	})
	return srv, proxy, lk
}

// timed runs f with a context whose deadline is d away, and returns f's
// error and how long after the deadline f returned (negative: before),
// net of the scheduling delays measured meanwhile (conformance.LagProbe:
// conformance.LagFactor times the largest), which are the machine's, not
// the backend's.
func timed(d time.Duration, f func(ctx context.Context) error) (error, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	dl, _ := ctx.Deadline()
	probe := conformance.StartLagProbe()
	err := f(ctx)
	over := time.Since(dl)
	probe.Stop()
	return err, over - probe.Extra()
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// backendGoroutines returns the stacks of goroutines running etcdlease
// code other than tests (of every Locker of the process: compare with a
// count taken before the Locker was opened).
func backendGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "etcdlease.(*") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

// TestHostileCloseEndsWaiters: Close ends 1 and 100 waiting Acquires with
// ErrClosed within 100 ms, returns quickly, and leaves no goroutine.
func TestHostileCloseEndsWaiters(t *testing.T) {
	srv := testserver.EtcdT(t)
	holder := openT(t, srv.Endpoints(), "closewait/")
	ctx := ctxT(t, 60*time.Second)
	l, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	// The holder's keepalive and watch run before the baseline is taken.
	waitFor(t, 5*time.Second, "the holder's watch never started", func() bool { return len(backendGoroutines()) >= 2 })
	for _, n := range []int{1, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			before := len(backendGoroutines())
			lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "closewait/"})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			type result struct {
				err error
				at  time.Time
			}
			res := make(chan result, n)
			for i := 0; i < n; i++ {
				go func() {
					_, err := lk.Acquire(context.Background(), "k", lockswap.WithTTL(10*time.Second))
					res <- result{err, time.Now()}
				}()
			}
			waitQueueLen(t, holder, "k", int64(n+1))
			start := time.Now()
			if err := lk.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			closeTook := time.Since(start)
			var worst time.Duration
			for i := 0; i < n; i++ {
				select {
				case r := <-res:
					if !errors.Is(r.err, lockswap.ErrClosed) {
						t.Errorf("waiter after Close: %v, want ErrClosed", r.err)
					}
					worst = max(worst, r.at.Sub(start))
				case <-time.After(5 * time.Second):
					t.Fatalf("%d of %d waiters still waiting 5s after Close", n-i, n)
				}
			}
			t.Logf("%d waiters: Close took %v, last waiter ended %v after Close began", n, closeTook, worst)
			// 100 ms, plus the scheduling allowance the conformance
			// suite's CloseEndsWaiters gives a loaded machine.
			if worst > 100*time.Millisecond+promise {
				t.Errorf("the last of %d waiters ended %v after Close began, want ≤ 100ms (+%v scheduling)", n, worst, promise)
			}
			if closeTook > time.Second {
				t.Errorf("Close took %v, want ≤ 1s", closeTook)
			}
			if n := queueLen(t, holder.Client(), holder, "k"); n != 1 {
				t.Errorf("after Close the queue has %d keys, want only the holder's", n)
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(backendGoroutines()) > before {
				if time.Now().After(deadline) {
					t.Fatalf("goroutines outlived Close (%d before):\n%s", before, strings.Join(backendGoroutines(), "\n\n"))
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestHostileCloseWhileEtcdHangs: with etcd blackholed or answering 10 s
// late, Close returns within a second and ends a waiter with ErrClosed.
func TestHostileCloseWhileEtcdHangs(t *testing.T) {
	for _, mode := range []string{"blackhole", "delay10s"} {
		t.Run(mode, func(t *testing.T) {
			before := len(backendGoroutines())
			srv, proxy, lk := proxied(t, "closehang/")
			ctx := ctxT(t, 30*time.Second)
			held, err := lk.TryAcquire(ctx, "held", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			other, err := New(benchClient(t, srv.Endpoints()), Options{Prefix: "closehang/"})
			if err != nil {
				t.Fatal(err)
			}
			lo, err := other.TryAcquire(ctx, "contended", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := lk.Acquire(context.Background(), "contended", lockswap.WithTTL(10*time.Second))
				errc <- err
			}()
			waitQueueLen(t, other, "contended", 2)
			if mode == "blackhole" {
				proxy.Blackhole(true)
			} else {
				proxy.SetDelay(10 * time.Second)
			}
			start := time.Now()
			cerr := lk.Close()
			took := time.Since(start)
			t.Logf("%s: Close took %v (%v)", mode, took, cerr)
			if took > time.Second {
				t.Errorf("Close with etcd hanging took %v, want ≤ 1s", took)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, lockswap.ErrClosed) {
					t.Errorf("waiter: %v, want ErrClosed", err)
				}
			case <-time.After(time.Second):
				t.Fatal("waiter still waiting 1s after Close returned")
			}
			if err := held.Release(ctx); !errors.Is(err, lockswap.ErrClosed) {
				t.Errorf("Release after Close: %v, want ErrClosed", err)
			}
			if err := held.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrClosed) {
				t.Errorf("Extend after Close: %v, want ErrClosed", err)
			}
			lo.Release(ctx)
			other.Close()
			waitFor(t, 5*time.Second, "goroutines outlived Close", func() bool { return len(backendGoroutines()) <= before })
		})
	}
}

// TestHostileDeadlines: against an etcd that never answers (blackhole) and
// one whose replies come 10 s late, every call returns within its deadline
// plus lockswap.DeadlineGrace (checked with the scheduling allowance of
// promise), and Close within a second. The worst overrun is logged.
func TestHostileDeadlines(t *testing.T) {
	for _, mode := range []string{"blackhole", "delay10s"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			_, proxy, lk := proxied(t, "deadline/")
			ctx := ctxT(t, 60*time.Second)
			var locks []lockswap.Lock
			for i := 0; i < 3; i++ {
				l, err := lk.TryAcquire(ctx, fmt.Sprint("held", i), lockswap.WithTTL(20*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				locks = append(locks, l)
			}
			if mode == "blackhole" {
				proxy.Blackhole(true)
			} else {
				proxy.SetDelay(10 * time.Second)
			}
			worst := map[string]time.Duration{}
			check := func(op string, d time.Duration, want error, f func(ctx context.Context) error) {
				t.Helper()
				err, over := timed(d, f)
				worst[op] = max(worst[op], over)
				if over > promise {
					t.Errorf("%s returned %v after its deadline, want ≤ %v (%v)", op, over, promise, err)
				}
				if err == nil || (want != nil && !errors.Is(err, want)) {
					t.Errorf("%s against a hanging etcd: %v, want an error matching %v", op, err, want)
				}
			}
			for _, d := range []time.Duration{300 * time.Millisecond, time.Second} {
				check("TryAcquire", d, lockswap.ErrUnavailable, func(ctx context.Context) error {
					_, err := lk.TryAcquire(ctx, "new", lockswap.WithTTL(20*time.Second))
					return err
				})
				check("Acquire", d, context.DeadlineExceeded, func(ctx context.Context) error {
					_, err := lk.Acquire(ctx, "new", lockswap.WithTTL(20*time.Second))
					return err
				})
				check("Acquire (lease grant)", d, context.DeadlineExceeded, func(ctx context.Context) error {
					_, err := lk.Acquire(ctx, "new", lockswap.WithTTL(7*time.Second))
					return err
				})
				check("Extend", d, lockswap.ErrUnavailable, func(ctx context.Context) error {
					return locks[0].Extend(ctx, 20*time.Second)
				})
			}
			check("Release", 500*time.Millisecond, lockswap.ErrUnavailable, func(ctx context.Context) error {
				return locks[1].Release(ctx)
			})
			// A second Release sends the delete again, bounded alike.
			check("Release", 300*time.Millisecond, lockswap.ErrUnavailable, func(ctx context.Context) error {
				return locks[1].Release(ctx)
			})
			// An already cancelled context: Release still sends the delete
			// and returns within the grace.
			check("Release", 0, lockswap.ErrUnavailable, func(ctx context.Context) error {
				<-ctx.Done()
				return locks[2].Release(ctx)
			})
			probe := conformance.StartLagProbe()
			start := time.Now()
			lk.Close()
			took := time.Since(start)
			probe.Stop()
			worst["Close (no deadline; bound 1s)"] = took
			if took > time.Second+probe.Extra() {
				t.Errorf("Close took %v, want ≤ 1s (+%v for the scheduling lag measured meanwhile)", took, probe.Extra())
			}
			for op, o := range worst {
				t.Logf("%s: worst overrun past the deadline %v", op, o.Round(time.Millisecond))
			}
		})
	}
}

// TestHostileLateGrantGivenBack: an Acquire whose put reaches etcd only
// after the caller gave up (replies 10 s late) leaves no lock behind: the
// key it wrote is deleted, and another client gets the lock.
//
// The put reaches etcd 10 s late, followed by the stream's cancel (also
// 10 s late). When the two arrive close together (the put was sent late in
// the attempt, on a loaded machine), etcd may drop the put unapplied:
// nothing is left behind, but nothing was shown either, so the scenario is
// tried again on another key, up to three times. Which of the two etcd
// does cannot be forced from outside (the put and the cancel travel in
// order on one stream): after three drops, each with nothing left behind,
// the test is skipped, saying so (a CI run beside two CPU hogs saw three).
func TestHostileLateGrantGivenBack(t *testing.T) {
	t.Parallel()
	srv, proxy, _ := proxied(t, "late/")
	ctx := ctxT(t, 150*time.Second)
	observer := benchClient(t, srv.Endpoints())
	for try := 1; ; try++ {
		if lateGrantGivenBack(t, ctx, srv, proxy, observer, fmt.Sprintf("k%d", try)) {
			return
		}
		if try == 3 {
			t.Skipf("in %d tries etcd dropped every late put with its cancel (nothing was left behind); the give-back of an applied late put was not exercised", try)
		}
	}
}

// lateGrantGivenBack runs TestHostileLateGrantGivenBack's scenario on key.
// It reports false, with nothing checked, when the late put never applied.
// Each try has its own Locker (its own connection through the proxy, whose
// data already read keeps its delay) and warms its lease while etcd
// answers, so that the late request is the put itself.
func lateGrantGivenBack(t *testing.T, ctx context.Context, srv *testserver.Etcd, proxy *testserver.Proxy, observer *clientv3.Client, key string) bool {
	lk, err := Open(Config{Endpoints: []string{proxy.Addr()}, Prefix: "late/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	l, err := lk.Acquire(ctx, "warm-"+key, lockswap.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wch := observer.Watch(wctx, lk.QueuePrefix(key), clientv3.WithPrefix())
	proxy.SetDelay(10 * time.Second)
	err, over := timed(time.Second, func(ctx context.Context) error {
		_, err := lk.Acquire(ctx, key, lockswap.WithTTL(30*time.Second))
		return err
	})
	t.Logf("Acquire %q with 10s-late replies: overrun %v, %v", key, over, err)
	if !errors.Is(err, context.DeadlineExceeded) || over > promise {
		t.Fatalf("Acquire: %v, %v past the deadline; want DeadlineExceeded within %v", err, over, promise)
	}
	proxy.SetDelay(0) // data already in the proxy keeps its 10 s delay
	var put, deleted time.Time
	t0 := time.Now()
	// The put lands 10 s after it was sent, within the attempt's second.
	noPut := time.After(15 * time.Second)
	giveUp := time.After(45 * time.Second)
	for deleted.IsZero() {
		select {
		case wr := <-wch:
			for _, ev := range wr.Events {
				switch {
				case ev.Type == clientv3.EventTypePut && put.IsZero():
					put = time.Now()
				case ev.Type == clientv3.EventTypeDelete && !put.IsZero():
					deleted = time.Now()
				}
			}
		case <-noPut:
			if put.IsZero() {
				resp, err := observer.Get(ctx, lk.QueuePrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if resp.Count != 0 {
					t.Fatalf("%d keys under %q, but the watch saw no put", resp.Count, lk.QueuePrefix(key))
				}
				t.Logf("the late put of %q never applied (etcd dropped it with its cancel); nothing left behind", key)
				return false
			}
		case <-giveUp:
			// The give-back's delete and the retired lease's revoke are
			// sent within 3 s; at the latest the lease (30 s TTL, no
			// longer kept alive) expires.
			t.Fatalf("45s after the late acquire: put seen %v, deleted %v", !put.IsZero(), !deleted.IsZero())
		}
	}
	t.Logf("the late put landed %v after the attempt, its key was deleted %v after that", put.Sub(t0), deleted.Sub(put))
	other := openT(t, srv.Endpoints(), "late/")
	ol, err := other.TryAcquire(ctx, key, lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("after the late put was given back: %v", err)
	}
	ol.Release(ctx)
	return true
}

// TestHostileHugeKey: a key whose queue prefix exceeds MaxQueuePrefixBytes
// is refused at once with ErrInvalid, before anything is sent (here to a
// blackholed etcd, where any request would hang), and errors quote keys
// cut short; a key just within the limit works.
func TestHostileHugeKey(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	lk := openT(t, srv.Endpoints(), "huge/")
	room := MaxQueuePrefixBytes - len(lk.QueuePrefix(""))
	fits := strings.Repeat("k", room)
	for _, acquire := range []func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error){lk.TryAcquire, lk.Acquire} {
		l, err := acquire(ctx, fits)
		if err != nil {
			t.Fatalf("a key of %d bytes (queue prefix at the limit): %.300v", len(fits), err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release of the largest key: %.300v", err)
		}
	}

	_, proxy, plk := proxied(t, "huge/")
	proxy.Blackhole(true)
	for _, key := range []string{fits + "k", strings.Repeat("/", room/3+1), strings.Repeat("x", 1<<20)} {
		for name, acquire := range map[string]func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error){
			"TryAcquire": plk.TryAcquire, "Acquire": plk.Acquire} {
			start := time.Now()
			_, err := acquire(ctx, key)
			took := time.Since(start)
			if !errors.Is(err, lockswap.ErrInvalid) || took > time.Second {
				t.Fatalf("%s of a %d-byte key: %.300v after %v, want ErrInvalid at once", name, len(key), err, took)
			}
			if n := len(err.Error()); n > 600 {
				t.Errorf("%s of a %d-byte key: error of %d bytes: %.300v", name, len(key), n, err)
			}
		}
	}
	// Other errors quote the key cut short too.
	big := strings.Repeat("z", 300<<10)
	err, _ := timed(300*time.Millisecond, func(ctx context.Context) error {
		_, err := plk.Acquire(ctx, big)
		return err
	})
	if err == nil || len(err.Error()) > 1000 {
		t.Errorf("Acquire of a %d-byte key against a blackholed etcd: error of %d bytes", len(big), len(fmt.Sprint(err)))
	}
}

// TestHostileTTL: TTLRange is lockswap's range; TTLs outside it are
// ErrInvalid; a TTL that the acquisition uses up is ErrInvalid and leaves
// nothing behind; no returned lock's Deadline has passed.
func TestHostileTTL(t *testing.T) {
	srv, proxy, plk := proxied(t, "ttl/")
	ctx := ctxT(t, 30*time.Second)
	lk := openT(t, srv.Endpoints(), "ttl/")
	lo, hi := lk.TTLRange()
	if lo != MinTTL || hi != lockswap.MaxTTL {
		t.Errorf("TTLRange() = %v, %v; want %v, %v", lo, hi, MinTTL, lockswap.MaxTTL)
	}
	for _, ttl := range []time.Duration{-time.Second, 0, lo - 1, hi + time.Second} {
		if _, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(ttl)); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("TryAcquire with ttl %v: %v, want ErrInvalid", ttl, err)
		}
	}
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{0, lo - 1, hi + time.Second} {
		if err := l.Extend(ctx, ttl); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Extend with ttl %v: %v, want ErrInvalid", ttl, err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Short TTLs directly: any lock returned still has validity left.
	for i := 0; i < 50; i++ {
		ttl := lo + time.Duration(i%5)*time.Millisecond
		l, err := lk.Acquire(ctx, "short", lockswap.WithTTL(ttl))
		now := time.Now()
		if err != nil {
			if !errors.Is(err, lockswap.ErrUnavailable) {
				t.Fatalf("Acquire with ttl %v: %v", ttl, err)
			}
			continue
		}
		if !l.Deadline().After(now) {
			t.Fatalf("Acquire with ttl %v returned a lock whose Deadline passed %v before the return", ttl, now.Sub(l.Deadline()))
		}
		l.Release(ctx)
	}
	// Through a proxy adding 600 ms each way, the 1 s TTL (MinTTL) is
	// used up by the round trip: the key is given back, and the attempt
	// failed as unavailable (a slow attempt, which a retry on a faster
	// path can fix; never ErrInvalid). Acquire tries again until its
	// outage bound. The lease's keepalives take as long, so the attempt
	// may instead fail because its lease was found lost: unavailable too.
	// (The kit's own "no validity" path: driver's TestNoLockPastItsDeadline.)
	if _, err := plk.Acquire(ctx, "warm", lockswap.WithTTL(lo)); err != nil { // grant the 1 s lease
		t.Fatal(err)
	}
	proxy.SetDelay(600 * time.Millisecond)
	for i, acquire := range []func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error){plk.TryAcquire, plk.Acquire} {
		_, err := acquire(ctx, "slow", lockswap.WithTTL(lo), lockswap.WithMaxOutage(300*time.Millisecond))
		// Acquire's last attempt may instead be the one the outage bound
		// cut short.
		if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("acquire %d with ttl %v over a 1.2 s round trip: %v, want ErrUnavailable", i, lo, err)
		}
		waitFor(t, 5*time.Second, "the key of a lock with no validity was not given back", func() bool {
			return queueLen(t, lk.Client(), lk, "slow") == 0
		})
	}
}

// TestHostileAuth: errors that retrying cannot fix end Acquire at once with
// ErrInvalid and say what to fix.
func TestHostileAuth(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	admin := benchClient(t, srv.Endpoints())
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "app", "apppw"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "app"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "app", "app"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	bad, err := Open(Config{Endpoints: srv.Endpoints(), Username: "app", Password: "wrong", DialTimeout: 5 * time.Second})
	if err == nil {
		_, err = bad.Acquire(context.Background(), "k")
		bad.Close()
	}
	t.Logf("wrong password: %v after %v", err, time.Since(start))
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "password") || time.Since(start) > 3*time.Second {
		t.Errorf("wrong password: %v after %v, want ErrInvalid at once, naming the password", err, time.Since(start))
	}
	if strings.Contains(fmt.Sprint(err), "wrong") {
		t.Errorf("the error shows the password: %v", err)
	}
	noPerm, err := Open(Config{Endpoints: srv.Endpoints(), Username: "app", Password: "apppw", Prefix: "perm/"})
	if err != nil {
		t.Fatal(err)
	}
	defer noPerm.Close()
	start = time.Now()
	_, err = noPerm.Acquire(context.Background(), "k")
	t.Logf("no permission: %v after %v", err, time.Since(start))
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "permission") || time.Since(start) > 3*time.Second {
		t.Errorf("no permission: %v after %v, want ErrInvalid at once, saying which permission", err, time.Since(start))
	}
}

// TestHostileConcurrentCloseAndCalls: calls racing with Close end with
// ErrClosed or succeed, and nothing outlives Close (run with -race).
func TestHostileConcurrentCloseAndCalls(t *testing.T) {
	srv := testserver.EtcdT(t)
	before := len(backendGoroutines())
	lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "race/"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := lk.Acquire(context.Background(), "k", lockswap.WithTTL(time.Duration(1+i%3)*time.Second))
				if err != nil {
					if !errors.Is(err, lockswap.ErrClosed) {
						t.Errorf("Acquire racing with Close: %v", err)
					}
					return
				}
				if err := l.Release(context.Background()); err != nil && !errors.Is(err, lockswap.ErrClosed) {
					t.Errorf("Release racing with Close: %v", err)
				}
			}
		}()
	}
	waitFor(t, 10*time.Second, "the 8 goroutines never queued", func() bool { return queueLen(t, lk.Client(), lk, "k") >= 4 })
	if err := lk.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	waitFor(t, 5*time.Second, "goroutines outlived Close", func() bool { return len(backendGoroutines()) <= before })
}
