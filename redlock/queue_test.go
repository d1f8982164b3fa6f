package redlock_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redlock"
)

// TestLocalQueue: goroutines of one Locker waiting for a key get it in
// arrival order, are woken by a release through the Locker, and share a
// contended key fairly (internal/queuetest), on 3 real redis-servers.
func TestLocalQueue(t *testing.T) {
	addrs, _ := realN(t, 3)
	for _, c := range redistest.Clients {
		s := queuetest.Subject{
			NewLocker: func(t *testing.T) lockswap.Locker {
				return newLocker(t, addrs, c.New, redlock.Options{Prefix: "queue:"})
			},
			Waiting: func(lk lockswap.Locker, key string) int { return redlock.Waiting(lk.(*redlock.Locker), key) },
		}
		t.Run(c.Name+"/fifo", func(t *testing.T) { queuetest.FIFO(t, s) })
		t.Run(c.Name+"/fairness", func(t *testing.T) { queuetest.Fairness(t, s) })
		t.Run(c.Name+"/close", func(t *testing.T) { queuetest.CloseEndsWaits(t, s) })
	}
}

// TestReleaseHandsOverInOneRequest: releasing a lock while a goroutine of
// the same Locker waits for the key releases it and takes it for the waiter
// in one request per instance (the waiter sends nothing of its own), on
// both fan-out paths; the waiter's lock is a normal Redlock lock: its
// token on every instance, a deadline within its TTL, and it releases.
func TestReleaseHandsOverInOneRequest(t *testing.T) {
	addrs, _ := realN(t, 3)
	raw := make([]*goredis.Client, len(addrs))
	for i, a := range addrs {
		raw[i] = goredis.NewClient(&goredis.Options{Addr: a})
		t.Cleanup(func() { raw[i].Close() })
	}
	pipelined := func(t *testing.T) (*redlock.Locker, func() int64) {
		lk, ccs := countingLocker(t, addrs, redlock.Options{})
		return lk, func() (n int64) {
			for _, c := range ccs {
				n += c.splits.Load() + c.direct.Load()
			}
			return n
		}
	}
	direct := func(t *testing.T) (*redlock.Locker, func() int64) {
		return countedGoRedisLocker(t, addrs, redlock.Options{InstanceTimeout: countedTimeout})
	}
	for name, mk := range map[string]func(*testing.T) (*redlock.Locker, func() int64){"redigo-pipelined": pipelined, "goredis-workers": direct} {
		t.Run(name, func(t *testing.T) {
			ctx, key := context.Background(), "handover1rt:"+name
			lk, requests := mk(t)
			held, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			const ttl = 7 * time.Second
			out := queuetest.QueueBehind(t, ctx, lk, key, ttl)
			before := requests()
			start := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatalf("release with a waiter: %v", err)
			}
			got := <-out
			if got.Err != nil {
				t.Fatalf("waiter: %v", got.Err)
			}
			if n := requests() - before; n != int64(len(addrs)) {
				t.Errorf("%d requests for the release and the waiter's acquisition, want %d (one per instance)", n, len(addrs))
			}
			for i, c := range raw {
				if v, _ := c.Get(ctx, key).Result(); v != got.Lock.Token() {
					t.Errorf("instance %d holds %q, want the waiter's token", i, v)
				}
			}
			if d := got.Lock.Deadline(); !d.After(time.Now()) || d.After(start.Add(ttl)) {
				t.Errorf("waiter's deadline %v after the release began, want within its TTL %v", d.Sub(start), ttl)
			}
			if err := got.Lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for i, c := range raw {
				if n, _ := c.Exists(ctx, key).Result(); n != 0 {
					t.Errorf("instance %d still has the key after the handed-over lock's release", i)
				}
			}
		})
	}
}

// TestHandOverOfLostLock: a stale release with a local waiter reports the
// loss and leaves the waiter waiting (queuetest.StaleReleaseWithWaiter);
// the other client keeps its majority.
func TestHandOverOfLostLock(t *testing.T) {
	addrs, _ := realN(t, 3)
	s := queuetest.Subject{
		NewLocker: func(t *testing.T) lockswap.Locker {
			return newLocker(t, addrs, redistest.GoRedis, redlock.Options{})
		},
		Waiting: func(lk lockswap.Locker, key string) int { return redlock.Waiting(lk.(*redlock.Locker), key) },
	}
	queuetest.StaleReleaseWithWaiter(t, s, 200*time.Millisecond, func(t *testing.T, key string, theirs lockswap.Lock) {
		// An instance where our key had not expired yet when the other
		// client asked is empty now: our release deleted it, and the
		// waiter's SET there was undone for want of a majority.
		theirsOn := 0
		for i, a := range addrs {
			switch v, _ := redistest.GoRedisClient(t, a).Get(context.Background(), key).Result(); v {
			case theirs.Token():
				theirsOn++
			case "":
			default:
				t.Errorf("instance %d holds %q after the stale release, want the other client's token or nothing", i, v)
			}
		}
		if theirsOn < 2 {
			t.Errorf("the other client's token is on %d of 3 instances after the stale release, want a majority", theirsOn)
		}
	})
}

// TestCancelMidRequest: an acquisition cancelled while its requests are on
// the way to the instances leaves no lock behind on any of them
// (redistest.CancelMidRequest), on both fan-out paths.
func TestCancelMidRequest(t *testing.T) {
	addrs, _ := realN(t, 3)
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			redistest.CancelMidRequest(t, addrs, func(t *testing.T, as []string) lockswap.Locker {
				return newLocker(t, as, c.New, redlock.Options{Prefix: c.Name + ":"})
			})
		})
	}
}
