package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/redigo"
	"github.com/lockswap/lockswap/redlock"
)

// countingClient wraps the redigo adapter and counts which path each
// request takes: Split (the pipelined fan-out) or the adapter's own
// one-command-per-round-trip methods.
type countingClient struct {
	redisclient.Client
	pool           *redigoredis.Pool
	splits, direct atomic.Int64
}

func (c *countingClient) Split(ctx context.Context) (redisclient.SplitConn, error) {
	c.splits.Add(1)
	return c.Client.(redisclient.Splitter).Split(ctx)
}

func (c *countingClient) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c.direct.Add(1)
	return c.Client.SetNXPX(ctx, key, value, ttl)
}

func (c *countingClient) Do(ctx context.Context, args ...any) (any, error) {
	c.direct.Add(1)
	return c.Client.Do(ctx, args...)
}

func (c *countingClient) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	c.direct.Add(1)
	return c.Client.Run(ctx, s, keys, args...)
}

// countedTimeout is the instance timeout of the tests that count
// requests, none of which may time out: far above a loaded machine's
// stalls (100 ms did not hold beside a CI's other work while a client
// dialed) and far below their TTLs (10 s).
const countedTimeout = time.Second

// countingLocker returns a Locker over redigo pools whose requests are
// counted; a zero opts.InstanceTimeout is countedTimeout.
func countingLocker(t *testing.T, addrs []string, opts redlock.Options) (*redlock.Locker, []*countingClient) {
	t.Helper()
	cs := make([]redisclient.Client, len(addrs))
	ccs := make([]*countingClient, len(addrs))
	for i, a := range addrs {
		p := redistest.RedigoPool(t, a)
		ccs[i] = &countingClient{Client: redigo.NewNamed(p, a), pool: p}
		cs[i] = ccs[i]
	}
	if opts.InstanceTimeout == 0 {
		opts.InstanceTimeout = countedTimeout
	}
	lk, err := redlock.New(cs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	if opts.Fence {
		redlock.RegisterMembers(t, lk)
	}
	return lk, ccs
}

// TestPipelinedWithRedigo: with redigo clients (which implement
// redisclient.Splitter) acquire, extend and release are pipelined, one
// connection per instance from the caller's goroutine, never through the
// adapter's one-round-trip commands; the results are the algorithm's, and a
// server that lost its scripts gets the script's source on the same path.
func TestPipelinedWithRedigo(t *testing.T) {
	for _, safe := range []bool{false, true} {
		t.Run(fmt.Sprintf("RestartSafety=%v", safe), func(t *testing.T) {
			addrs, _ := realN(t, 3)
			ctx := ctxT(t)
			raw := make([]*goredis.Client, 3)
			for i, a := range addrs {
				raw[i] = redistest.GoRedisClient(t, a)
				if safe { // an epoch old enough that no instance is in quarantine
					raw[i].Set(ctx, redlock.EpochKey, fmt.Sprintf("%d.0.test", time.Now().Add(-time.Hour).Unix()), 0)
				}
			}
			lk, ccs := countingLocker(t, addrs, redlock.Options{RestartSafety: safe, MaxTTL: time.Minute})
			// A new Locker dials its first connections from the workers.
			warm, err := lk.TryAcquire(ctx, "warm", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			warm.Release(ctx)
			for i, c := range ccs {
				if d := c.direct.Load(); d != 1 {
					t.Errorf("instance %d: first request: %d one-round-trip commands, want 1 (the new Locker's first dial in parallel)", i, d)
				}
				c.direct.Store(0)
				c.splits.Store(0)
			}
			l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for i := range raw {
				if v, _ := raw[i].Get(ctx, "k").Result(); v != l.Token() {
					t.Errorf("instance %d holds %q, want our token %q", i, v, l.Token())
				}
			}
			if err := l.Extend(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			for i := range raw {
				if d := raw[i].PTTL(ctx, "k").Val(); d <= 10*time.Second {
					t.Errorf("instance %d: PTTL %v after Extend(30s)", i, d)
				}
			}
			// The servers forget the scripts: Release must fall back to EVAL.
			for _, c := range raw {
				c.ScriptFlush(ctx)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release after SCRIPT FLUSH: %v", err)
			}
			for i := range raw {
				if v, err := raw[i].Get(ctx, "k").Result(); err == nil {
					t.Errorf("instance %d still holds %q after Release", i, v)
				}
			}
			for i, c := range ccs {
				if s, d := c.splits.Load(), c.direct.Load(); s != 3 || d != 0 {
					t.Errorf("instance %d: %d pipelined requests and %d one-round-trip commands, want 3 and 0 (acquire, extend, release)", i, s, d)
				}
			}
			if !safe {
				return
			}
			// Two instances lose their data (the epoch with it): on the
			// pipelined path too their votes stop counting.
			for _, c := range raw[:2] {
				c.FlushAll(ctx)
			}
			if _, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(err.Error(), "restarted") {
				t.Fatalf("2 of 3 instances lost their epoch: err = %v, want ErrUnavailable naming the restarted instances", err)
			}
			for i, c := range ccs {
				if d := c.direct.Load(); d != 0 {
					t.Errorf("instance %d: %d one-round-trip commands, want the pipelined path", i, d)
				}
			}
		})
	}
}

// TestPipelinedTimeout: on the pipelined path, an instance that does not
// answer within the instance timeout is an unknown outcome: it counts as
// not answered in the outage error (which names it), the attempt is undone
// there too, and its connection is discarded rather than pooled, so that a
// late reply is never read as the answer to a later command.
func TestPipelinedTimeout(t *testing.T) {
	addrs, srvs := realN(t, 3)
	proxy := testserver.ProxyT(t, addrs[2])
	addrs[2] = proxy.Addr()
	ctx := ctxT(t)
	// A timeout the live instance's answer keeps on a loaded machine, far
	// below the slow one's delay.
	const timeout = 300 * time.Millisecond
	lk, ccs := countingLocker(t, addrs, redlock.Options{InstanceTimeout: timeout})
	// Warm: a connection per pool, scripts loaded.
	l, err := lk.Acquire(ctx, "warm", lockswap.WithTTL(10*time.Second), lockswap.WithRetry(lockswap.ConstantRetry(10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	srvs[0].Kill()
	const delay = time.Second // the reply comes after 2 s
	proxy.SetDelay(delay)
	splits := ccs[2].splits.Load()
	start := time.Now()
	_, err = lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	elapsed := time.Since(start)
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("1 dead, 1 slow of 3: err = %v, want ErrUnavailable only", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "1 of 3 instances answered (need 2)") || !strings.Contains(msg, proxy.Addr()) ||
		!strings.Contains(msg, "timeout") {
		t.Errorf("outage error %q: want 1 of 3 answered, naming the slow instance %s and its timeout", msg, proxy.Addr())
	}
	if ccs[2].splits.Load() == splits {
		t.Error("the acquire did not use the pipelined path on the slow instance")
	}
	if elapsed > 2*delay {
		t.Errorf("attempt took %v: the slow instance must cost the instance timeout (%v), not its %v", elapsed, timeout, 2*delay)
	}
	// (A background undo may hold a connection now: the property is that
	// no connection whose read timed out went back to the idle pool.)
	if n := ccs[2].pool.Stats().IdleCount; n != 0 {
		t.Errorf("slow instance's pool keeps %d idle connections after its requests timed out; want them discarded", n)
	}
	// Undone on the instance that said OK...
	direct1 := redistest.GoRedisClient(t, srvs[1].Addr())
	if n := direct1.Exists(ctx, "k").Val(); n != 0 {
		t.Error("instance 1 still has the key of a failed attempt")
	}
	// ...and on the slow one: its SET arrives late, then the undo deletes it.
	direct2 := redistest.GoRedisClient(t, srvs[2].Addr())
	deadline := time.Now().Add(5 * time.Second)
	for {
		info := direct2.Info(ctx, "commandstats").Val()
		if cmdCalls(info, "set") >= 2 && direct2.Exists(ctx, "k").Val() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timed-out SET on the slow instance was not undone: exists=%d, %s", direct2.Exists(ctx, "k").Val(), info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Back to normal: the slow instance votes again, through clean
	// connections (a stale reply would be misread as this one's).
	proxy.SetDelay(0)
	for i := range 3 {
		l, err := lk.TryAcquire(ctx, fmt.Sprintf("after%d", i), lockswap.WithTTL(10*time.Second))
		if err != nil {
			t.Fatalf("acquire %d after the delay was lifted: %v", i, err)
		}
		if v := direct2.Get(ctx, fmt.Sprintf("after%d", i)).Val(); v != l.Token() {
			t.Errorf("slow instance holds %q, want our token", v)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d after the delay was lifted: %v", i, err)
		}
	}
	if ccs[2].splits.Load() < splits+3 {
		t.Error("the recovered instance is not back on the pipelined path")
	}
}

// cmdCalls reads the calls of cmd from INFO commandstats.
func cmdCalls(info, cmd string) int {
	_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	return n
}

// fanoutGoroutines counts the goroutines running the fan-out's workers.
func fanoutGoroutines() (workers, extra int) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case strings.Contains(g, "redlock.(*fanout).extraWorker"):
			extra++
		case strings.Contains(g, "redlock.(*fanout).worker"):
			workers++
		}
	}
	return workers, extra
}

// TestExtraWorkersEndWithClose: under concurrent use the go-redis fan-out
// starts extra workers beyond its fixed ones (so that requests run on
// goroutines whose stacks have grown); Close ends every one of them.
func TestExtraWorkersEndWithClose(t *testing.T) {
	addrs, _ := miniredisN(t, 3)
	cs := make([]redisclient.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redistest.GoRedis(t, a)
	}
	lk, err := redlock.New(cs, redlock.Options{InstanceTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var maxExtra atomic.Int64
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				l, err := lk.TryAcquire(ctx, fmt.Sprintf("k%d-%d", g, i), lockswap.WithTTL(10*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if g == 0 {
					if _, extra := fanoutGoroutines(); int64(extra) > maxExtra.Load() {
						maxExtra.Store(int64(extra))
					}
				}
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if w, _ := fanoutGoroutines(); w != 2*len(addrs) {
		t.Errorf("%d fixed workers, want 2 × N = %d", w, 2*len(addrs))
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for every worker to say it is done (its deferred
	// WaitGroup.Done); a worker may still be on its last instructions, on
	// a busy machine for a while: wait for its stack to go, within 1 s.
	deadline := time.Now().Add(time.Second)
	for w, extra := fanoutGoroutines(); w+extra != 0; w, extra = fanoutGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("1s after Close %d workers and %d extra workers remain", w, extra)
		}
		runtime.Gosched()
	}
	if maxExtra.Load() == 0 {
		t.Skip("no extra worker was needed: the machine ran the callers one after another")
	}
}
