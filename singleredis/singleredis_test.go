package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

func newLocker(t *testing.T, addr string, newClient redistest.NewClient, opts singleredis.Options) *singleredis.Locker {
	t.Helper()
	lk, err := singleredis.New(newClient(t, addr), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// TestStandardClientInterop: the value is the plain token, so a raw client
// following the standard SET NX PX + compare-and-delete scheme excludes us
// and is excluded by us.
func TestStandardClientInterop(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			raw := redistest.GoRedisClient(t, mr.Addr())
			lk := newLocker(t, mr.Addr(), c.New, singleredis.Options{})
			ctx := context.Background()

			if ok, err := raw.SetNX(ctx, "job", "raw-owner-token", time.Minute).Result(); err != nil || !ok {
				t.Fatalf("raw SET NX PX: %v %v", ok, err)
			}
			if _, err := lk.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("lockswap TryAcquire on a key a standard client holds: %v, want ErrHeld", err)
			}
			if v, _ := raw.Get(ctx, "job").Result(); v != "raw-owner-token" {
				t.Fatalf("the standard client's lock value changed to %q", v)
			}
			raw.Del(ctx, "job")

			l, err := lk.TryAcquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := raw.SetNX(ctx, "job", "raw-owner-token", time.Minute).Result(); ok {
				t.Fatal("a standard client took a key lockswap holds")
			}
			if v, _ := raw.Get(ctx, "job").Result(); v != l.Token() {
				t.Fatalf("stored value %q is not the plain token %q", v, l.Token())
			}
			// A standard compare-and-delete with another token leaves our lock.
			n, _ := raw.Eval(ctx, `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`, []string{"job"}, "not-ours").Int()
			if n != 0 || mr.Exists("job") == false {
				t.Fatal("a compare-and-delete with another token removed our lock")
			}
			if err := l.Release(ctx); err != nil || mr.Exists("job") {
				t.Fatalf("Release: %v; key left: %v", err, mr.Exists("job"))
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	if _, err := singleredis.New(nil, singleredis.Options{}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("New(nil client) = %v, want ErrInvalid", err)
	}
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			ctx := context.Background()
			mr.HSet("job", "field", "someone else's data")
			for _, fence := range []bool{false, true} {
				lk := newLocker(t, mr.Addr(), c.New, singleredis.Options{Fence: fence})
				_, err := lk.TryAcquire(ctx, "job")
				if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "hash") {
					t.Errorf("fence=%v: TryAcquire on a key holding a hash: %v, want ErrInvalid naming the type", fence, err)
				}
				_, err = lk.Acquire(ctx, "job", lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
				if !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("fence=%v: Acquire must not wait for a key that will never be a lock: %v", fence, err)
				}
			}
			if v := mr.HGet("job", "field"); v != "someone else's data" {
				t.Errorf("the hash under the key was changed to %q", v)
			}
			// A fence counter key that is not a counter.
			mr.HSet(singleredis.FenceKey("other"), "f", "v")
			lk := newLocker(t, mr.Addr(), c.New, singleredis.Options{Fence: true})
			if _, err := lk.TryAcquire(ctx, "other"); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("fence counter holding a hash: %v, want ErrInvalid", err)
			}
			if mr.Exists("other") {
				t.Error("a failed fenced acquire left the lock key behind")
			}
		})
	}
}

func TestFenceKeySameSlot(t *testing.T) {
	for k, want := range map[string]string{
		"job":       "{job}:fence",
		"{user1}:a": "{user1}:a:fence",
		"app:{x}:y": "app:{x}:y:fence",
		"we}ird":    "we}ird:fence",
		"{}literal": "{}literal:fence", // cannot share a slot: see FenceKey
	} {
		if got := singleredis.FenceKey(k); got != want {
			t.Errorf("FenceKey(%q) = %q, want %q", k, got, want)
		}
	}
}

// TestFencingRejectsPausedHolder demonstrates Guarantees().Fencing: a
// holder that pauses past its validity loses exclusion, but the resource
// rejects its write because a newer holder's fence is higher.
func TestFencingRejectsPausedHolder(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			ctx := context.Background()
			a := newLocker(t, mr.Addr(), c.New, singleredis.Options{Fence: true})
			b := newLocker(t, mr.Addr(), c.New, singleredis.Options{Fence: true})
			if !a.Guarantees().Fencing || a.Guarantees().SurvivesHolderPause {
				t.Fatal("fenced singleredis must declare fencing and no pause safety")
			}
			var res fenced.Resource
			la, err := a.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			fa, _ := la.Fence()
			mr.FastForward(2 * time.Second) // a pauses past its TTL
			lb, err := b.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
			if err != nil {
				t.Fatalf("second client after the first's TTL: %v", err)
			}
			fb, _ := lb.Fence()
			if err := res.Write("b", fb); err != nil {
				t.Fatal(err)
			}
			// a wakes up and writes: exclusion was lost, fencing catches it.
			if err := res.Write("a", fa); !errors.Is(err, fenced.ErrStale) {
				t.Fatalf("stale holder's write: %v, want ErrStale (fences %d then %d)", err, fa, fb)
			}
			if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("stale holder's Release: %v, want ErrLost", err)
			}
			if st := res.Stats(); st.LastWriter != "b" || st.Rejected != 1 {
				t.Errorf("resource = %+v; the stale write must change nothing", st)
			}
		})
	}
}

// TestUnfencedPauseViolatesExclusion shows the declared weakness without
// fencing: the paused holder still believes it may write, and nothing stops
// it.
func TestUnfencedPauseViolatesExclusion(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	a := newLocker(t, mr.Addr(), redistest.GoRedis, singleredis.Options{})
	b := newLocker(t, mr.Addr(), redistest.GoRedis, singleredis.Options{})
	var res fenced.Resource
	la, err := a.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res.Enter("a")
	mr.FastForward(2 * time.Second)
	lb, err := b.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("second client after the first's TTL: %v", err)
	}
	res.Enter("b")
	if _, ok := la.Fence(); ok {
		t.Fatal("unfenced lock returned a fence")
	}
	if st := res.Stats(); st.Overlaps != 1 {
		t.Fatalf("overlaps = %d, want 1: a paused holder and the next one both inside", st.Overlaps)
	}
	lb.Release(ctx)
}

// TestRestartWithoutPersistenceLosesLock shows the declared weakness
// SurvivesRestart=false on a real redis-server.
func TestRestartWithoutPersistenceLosesLock(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx := context.Background()
	a := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
	b := newLocker(t, srv.Addr(), redistest.Redigo, singleredis.Options{})
	if a.Guarantees().SurvivesRestart {
		t.Fatal("singleredis must not declare surviving a restart")
	}
	la, err := a.TryAcquire(ctx, "job", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var lb lockswap.Lock
	deadline := time.Now().Add(10 * time.Second)
	for lb == nil {
		lb, err = b.TryAcquire(ctx, "job", lockswap.WithTTL(time.Minute))
		if err != nil && time.Now().After(deadline) {
			t.Fatalf("second client after restart: %v", err)
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if time.Now().After(la.Deadline()) {
		t.Fatal("first lock's validity ended; the test proves nothing")
	}
	// Both believe they hold the lock: exclusion lost, as declared.
	select {
	case <-la.Done():
		t.Fatal("the first holder was told; singleredis cannot know")
	default:
	}
	if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("first holder's Release after the restart: %v, want ErrLost", err)
	}
	lb.Release(ctx)
}

// TestFailoverLosesLock shows SurvivesFailover=false: a replica that never
// received the key is promoted and a second client acquires.
func TestFailoverLosesLock(t *testing.T) {
	primary := testserver.RedisT(t, testserver.RedisOptions{})
	// The replica follows the primary through a proxy, so that the test can
	// cut replication before the lock is written.
	link := testserver.ProxyT(t, primary.Addr())
	replica := testserver.RedisT(t, testserver.RedisOptions{ReplicaOf: link.Addr()})
	ctx := context.Background()
	radmin := redistest.GoRedisClient(t, replica.Addr())
	// Wait until the replica is in sync, so that only the lock is missing.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := radmin.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never linked: %s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	link.Blackhole(true) // asynchronous replication: the lock will not reach the replica
	a := newLocker(t, primary.Addr(), redistest.GoRedis, singleredis.Options{})
	if a.Guarantees().SurvivesFailover {
		t.Fatal("singleredis must not declare surviving failover")
	}
	la, err := a.TryAcquire(ctx, "job", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	primary.Kill()
	if err := radmin.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatalf("promote replica: %v", err)
	}
	b := newLocker(t, replica.Addr(), redistest.Redigo, singleredis.Options{})
	lb, err := b.TryAcquire(ctx, "job", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("after failover the promoted replica refused the lock (%v); the weakness did not show", err)
	}
	if !time.Now().Before(la.Deadline()) {
		t.Fatal("first lock's validity ended; the test proves nothing")
	}
	lb.Release(ctx)
}

func TestFenceCounterNotACounter(t *testing.T) {
	for _, bad := range []string{"-1", "abc", "1.5"} {
		mr := miniredis.RunT(t)
		mr.Set(singleredis.FenceKey("job"), bad)
		lk := newLocker(t, mr.Addr(), redistest.GoRedis, singleredis.Options{Fence: true})
		_, err := lk.Acquire(context.Background(), "job", lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "fence counter") {
			t.Errorf("counter %q: err = %v, want ErrInvalid naming the fence counter", bad, err)
		}
		if mr.Exists("job") {
			t.Errorf("counter %q: the lock key was written although the attempt failed", bad)
		}
		if v, _ := mr.Get(singleredis.FenceKey("job")); v != bad {
			t.Errorf("counter %q changed to %q", bad, v)
		}
	}
}

// lostReply is a Redis client whose SET is applied but whose reply is lost:
// the caller sees a timeout.
type lostReply struct{ redisclient.Client }

func (c lostReply) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c.Client.SetNXPX(ctx, key, value, ttl)
	return false, fmt.Errorf("read tcp: i/o timeout: %w", context.DeadlineExceeded)
}

func (c lostReply) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) > 0 && args[0] == "SET" {
		c.Client.Do(ctx, args...)
		return nil, fmt.Errorf("read tcp: i/o timeout: %w", context.DeadlineExceeded)
	}
	return c.Client.Do(ctx, args...)
}

// TestAcquireCleansUpAfterLostReply: when the SET's reply does not come
// back, the SET may still have been applied; the attempt removes it
// (compare-and-delete with its token) instead of leaving a lock nobody holds
// for a whole TTL. The removal runs in the background, off the caller's
// time.
func TestAcquireCleansUpAfterLostReply(t *testing.T) {
	for _, c := range redistest.Clients {
		mr := miniredis.RunT(t)
		lk, err := singleredis.New(lostReply{c.New(t, mr.Addr())}, singleredis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = lk.TryAcquire(context.Background(), "job", lockswap.WithTTL(time.Minute))
		if !errors.Is(err, lockswap.ErrUnavailable) {
			t.Fatalf("%s: TryAcquire with a lost reply: %v, want ErrUnavailable", c.Name, err)
		}
		queuetest.WaitUntil(t, c.Name+": the SET whose reply was lost removed (its TTL is a minute and nobody holds it)", func() bool {
			return !mr.Exists("job")
		})
		lk.Close()
	}
}
