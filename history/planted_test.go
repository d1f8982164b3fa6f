package history_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

// The planted bugs (issue 32): each is a singleredis lock with one thing
// a broken lock library gets wrong, and each must give a history the
// checker rejects, while the same steps with the correct lock give one it
// accepts. Each bad case is forced, not waited for.
const (
	releaseWithoutCompare = "release without compare-and-delete"
	validityNotReduced    = "validity not reduced by the time the acquire took"
	noValidity            = "no validity check at all"
	fenceRestartsAt1      = "fences from a counter that restarts at 1"
)

// planted is a lock with bug (none: "") over a correct singleredis lock.
type planted struct {
	lockswap.Lock
	bug      string
	rc       *redis.Client // the server, for the broken release and fence
	deadline time.Time     // when not zero, what Deadline says
	fence    uint64        // when not zero, what Fence says
}

// acquire takes key with lk and plants bug in it; start is when the
// attempt began.
func acquire(ctx context.Context, t *testing.T, lk lockswap.Locker, rc *redis.Client, bug, key string, ttl time.Duration) *planted {
	t.Helper()
	l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	p := &planted{Lock: l, bug: bug, rc: rc}
	switch bug {
	case validityNotReduced:
		// The validity counted from the reply, not from the request.
		p.deadline = time.Now().Add(ttl)
	case noValidity:
		p.deadline = time.Now().Add(time.Hour)
	case fenceRestartsAt1:
		// A counter on the server without the clock's floor: a restart
		// without data sets it back to 1.
		n, err := rc.Incr(ctx, "planted-fence:"+key).Uint64()
		if err != nil {
			t.Fatal(err)
		}
		p.fence = n
	}
	return p
}

func (p *planted) Deadline() time.Time {
	if !p.deadline.IsZero() {
		return p.deadline
	}
	return p.Lock.Deadline()
}

func (p *planted) Fence() (uint64, bool) {
	if p.fence != 0 {
		return p.fence, true
	}
	return p.Lock.Fence()
}

func (p *planted) Release(ctx context.Context) error {
	if p.bug == releaseWithoutCompare {
		return p.rc.Del(ctx, "p:"+p.Key()).Err()
	}
	return p.Lock.Release(ctx)
}

// guarded is a careful holder's section: it reads the register, runs
// between (its work), and writes only if its lock's Deadline has not
// passed, a check right before a write that takes no time (the register
// is in memory). A section that does not write is not recorded: it
// changed nothing.
func guarded(ctx context.Context, rec *history.Recorder, reg *history.Register, client int, l lockswap.Lock, between func()) {
	fence, _ := l.Fence()
	op := history.Op{Client: client, Key: l.Key(), Token: l.Token(), Fence: fence, Call: rec.Now()}
	v, ok := reg.Read(op.Key, fence)
	if between != nil {
		between()
	}
	if !time.Now().Before(l.Deadline()) {
		return
	}
	if ok {
		op.Read = v
		op.Wrote = reg.Write(op.Key, v+1, fence)
	}
	op.Return = rec.Now()
	rec.Add(op)
}

// takeWhenFree tries lk until it gets key (its holder's lock expired on
// the server), within 10 s.
func takeWhenFree(ctx context.Context, t *testing.T, lk lockswap.Locker, rc *redis.Client, key string) *planted {
	t.Helper()
	stop := time.Now().Add(10 * time.Second)
	for {
		l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(5*time.Second))
		if err == nil {
			return &planted{Lock: l, rc: rc}
		}
		if !errors.Is(err, lockswap.ErrHeld) || time.Now().After(stop) {
			t.Fatalf("take %s when free: %v", key, err)
		}
		time.Sleep(2 * time.Millisecond) // a poll interval, not a wait for a condition
	}
}

// TestPlantedBugsCaught: every planted bug gives a counterexample (a lost
// update, or fences that go down), and the correct lock, through the same
// steps, gives a history that holds.
func TestPlantedBugsCaught(t *testing.T) {
	testserver.NeedRedisServer(t)
	for _, bug := range []string{releaseWithoutCompare, validityNotReduced, noValidity, fenceRestartsAt1} {
		t.Run(bug, func(t *testing.T) {
			for _, broken := range []bool{true, false} {
				b := ""
				if broken {
					b = bug
				}
				res := plantedRun(t, bug, b)
				caught := len(res.Violations) > 0 || len(res.Fences) > 0
				switch {
				case broken && !caught:
					t.Errorf("the planted bug was not caught: %+v", res)
				case !broken && (caught || !res.Linearizable):
					t.Errorf("the correct lock, same steps: %+v, want a history that holds", res)
				}
			}
		})
	}
}

// plantedRun forces the bad case of scenario (one of the bugs) with
// locks that carry bug ("" for the correct lock) and returns the checked
// history.
func plantedRun(t *testing.T, scenario, bug string) history.Result {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	fenced := scenario == fenceRestartsAt1
	newLocker := func(addr string) lockswap.Locker {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		lk, err := singleredis.New(goredis.New(c), singleredis.Options{Prefix: "p:", Fence: fenced})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lk.Close() })
		return lk
	}
	// Client 0 reaches the server through a proxy that, for
	// validityNotReduced, delays each way by 300 ms.
	proxy := testserver.ProxyT(t, srv.Addr())
	lks := []lockswap.Locker{newLocker(proxy.Addr()), newLocker(srv.Addr()), newLocker(srv.Addr())}
	rec, reg := history.NewRecorder(), history.NewRegister(fenced)

	switch scenario {
	case releaseWithoutCompare:
		// Client 0's lock expires before it releases; client 1 takes it;
		// client 0's release deletes client 1's key, client 2 takes it
		// too while client 1 works.
		a := acquire(ctx, t, lks[0], rc, bug, "k", 300*time.Millisecond)
		guarded(ctx, rec, reg, 0, a, nil)
		<-a.Done()
		b := takeWhenFree(ctx, t, lks[1], rc, "k")
		guarded(ctx, rec, reg, 1, b, func() {
			a.Release(ctx) // a broken release deletes b's key; the correct one fails
			c, err := lks[2].TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
			switch {
			case err == nil:
				guarded(ctx, rec, reg, 2, c, nil)
				c.Release(ctx)
			case !errors.Is(err, lockswap.ErrHeld):
				t.Fatal(err)
			}
		})
		b.Release(ctx)
	case validityNotReduced:
		// Client 0's acquire takes 600 ms (300 each way): the server's key
		// lives from its middle, so it ends 300 ms before a validity
		// counted from the reply. Client 1 takes the lock when the key
		// expires, while client 0 works; client 0 then checks its
		// validity and writes.
		warm := acquire(ctx, t, lks[0], rc, "", "warm", time.Second) // connected, scripts loaded
		warm.Release(ctx)
		proxy.SetDelay(300 * time.Millisecond)
		a := acquire(ctx, t, lks[0], rc, bug, "k", time.Second)
		guarded(ctx, rec, reg, 0, a, func() {
			b := takeWhenFree(ctx, t, lks[1], rc, "k")
			guarded(ctx, rec, reg, 1, b, nil)
			b.Release(ctx)
		})
	case noValidity:
		// Client 0 works past its lock; client 1 takes it meanwhile.
		a := acquire(ctx, t, lks[0], rc, bug, "k", 300*time.Millisecond)
		guarded(ctx, rec, reg, 0, a, func() {
			b := takeWhenFree(ctx, t, lks[1], rc, "k")
			guarded(ctx, rec, reg, 1, b, nil)
			b.Release(ctx)
		})
	case fenceRestartsAt1:
		// Two sections, a restart without data, a third.
		for range 2 {
			a := acquire(ctx, t, lks[1], rc, bug, "k", 5*time.Second)
			guarded(ctx, rec, reg, 1, a, nil)
			a.Release(ctx)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		a := acquire(ctx, t, lks[2], rc, bug, "k", 5*time.Second)
		guarded(ctx, rec, reg, 2, a, nil)
		a.Release(ctx)
	}
	res, err := history.Check(rec.Ops(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
