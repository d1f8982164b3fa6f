package historyrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesis"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestClockJumpFault: legacysetnx's clock faults move one client's wall
// clock, which is what the legacy pattern's declared weakness
// (Guarantees().Clock is ClockSynchronized) needs: with client 1's clock
// ClockJump ahead, client 1 takes over client 0's live lock of the run's
// TTL. With server_time the jump changes nothing: client 1 finds the lock
// held.
func TestClockJumpFault(t *testing.T) {
	testserver.NeedRedisServer(t)
	for _, serverTime := range []bool{false, true} {
		ctx, e, lks := startTwo(t, started(legacy(serverTime)))
		heal, err := faultNamed(t, e, "jump client 1's clock ahead").Inject()
		if err != nil {
			t.Fatal(err)
		}
		defer heal()
		// The attempt must end while client 0's lock is valid to say
		// anything; on a machine too busy for that within a TTL, try again.
		for try := 1; ; try++ {
			l0, err := lks[0].TryAcquire(ctx, "k", lockswap.WithTTL(TTL))
			if err != nil {
				t.Fatal(err)
			}
			l1, err := lks[1].TryAcquire(ctx, "k", lockswap.WithTTL(TTL))
			live := time.Now().Before(l0.Deadline())
			if err == nil {
				l1.Release(ctx)
			}
			l0.Release(ctx)
			if !live {
				if try == 3 {
					t.Skip("no attempt ended within a TTL of the lock it tried (a busy machine)")
				}
				continue
			}
			switch {
			case !serverTime && err != nil:
				t.Errorf("client clocks: client 1, its clock %v ahead, got %v on a live lock of %v, want to take it over", ClockJump, err, TTL)
			case serverTime && !errors.Is(err, lockswap.ErrHeld):
				t.Errorf("server_time: client 1 got %v on a live lock, want ErrHeld: the jump must change nothing", err)
			}
			break
		}
	}
}

// TestLaggingFailover: the failover fault leaves the master with its
// restart-safety epoch and nothing else (a replica that missed the recent
// writes, which restart safety cannot tell from the old master), breaks
// the clients' connections, and lets them reconnect to the new data.
func TestLaggingFailover(t *testing.T) {
	testserver.NeedRedisServer(t)
	e := &env{}
	t.Cleanup(e.stop)
	srv, p, err := e.redisVia()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 1})
	defer c.Close()
	if err := c.MSet(ctx, redlock.EpochKey, "1.2.tok", "history:a", "token").Err(); err != nil {
		t.Fatal(err)
	}
	before, err := c.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := laggingFailover("master 0", srv, p).Inject(); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 1 || keys[0] != redlock.EpochKey {
		t.Fatalf("after the failover the master has keys %q (%v), want only the epoch", keys, err)
	}
	if v, _ := c.Get(ctx, redlock.EpochKey).Result(); v != "1.2.tok" {
		t.Errorf("epoch %q after the failover, want the old master's", v)
	}
	if after, err := c.ClientID(ctx).Result(); err != nil || after == before {
		t.Errorf("client id %d after the failover (%v), %d before: want a new connection", after, err, before)
	}
}

// TestBareMajorityFailover: the fault gives a second holder, which is why
// redlock3+fence declares SurvivesFailover false and relies on its fence.
// While it holds, a lock is granted by masters 0 and 1 only; when it
// heals, master 0 fails over to a replica without that grant, and another
// client takes the same lock while the first one's is valid, with a
// higher fence, so a register that checks fences refuses the first
// holder's late write.
func TestBareMajorityFailover(t *testing.T) {
	testserver.NeedRedisServer(t)
	ctx, e, lks := startTwo(t, redlockStarted(3))
	// Every master gets its epoch first (restart safety counts a master
	// without one as restarted): Acquire waits out that first max_ttl.
	warm, err := lks[0].Acquire(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	warm.Release(ctx)
	heal, err := faultNamed(t, e, "bare majority").Inject()
	if err != nil {
		t.Fatal(err)
	}
	first, err := lks[0].Acquire(ctx, "k", lockswap.WithTTL(2*time.Second))
	heal()
	if err != nil {
		t.Fatal(err)
	}
	second, err := lks[1].TryAcquire(ctx, "k", lockswap.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("after the failover a second client got %v, want the lock (the first one's grants are one too few)", err)
	}
	defer second.Release(ctx)
	if !time.Now().Before(first.Deadline()) {
		t.Skip("the first lock ended before the second was granted (a busy machine): nothing shown")
	}
	f1, _ := first.Fence()
	f2, _ := second.Fence()
	if f2 <= f1 {
		t.Errorf("fences %d then %d: the second holder's must be higher, so the first one's late write is refused", f1, f2)
	}
	reg := history.NewRegister(true)
	if !reg.Write("k", 1, f2) || reg.Write("k", 2, f1) {
		t.Error("the fenced register must accept the second holder's write and refuse the first one's")
	}
}

// startTwo starts a configuration for the test, which stops it, and opens
// two of its clients, closed when the test ends; ctx ends then too, or
// after a minute.
func startTwo(t *testing.T, start func() (*env, error)) (context.Context, *env, [2]lockswap.Locker) {
	t.Helper()
	e, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	var lks [2]lockswap.Locker
	for i := range lks {
		if lks[i], err = e.openClient(ctx, i); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lks[i].Close() })
	}
	return ctx, e, lks
}

// faultNamed returns the fault of e whose name contains part.
func faultNamed(t *testing.T, e *env, part string) nemesis.Fault {
	t.Helper()
	for _, f := range e.faults {
		if strings.Contains(f.Name, part) {
			return f
		}
	}
	t.Fatalf("no fault %q among %d", part, len(e.faults))
	return nemesis.Fault{}
}
