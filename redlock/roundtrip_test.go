package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// TestContendedAttemptIsOneRequest: an attempt on a key held on every
// instance (TryAcquire, and each attempt of an Acquire that waits) costs
// one request per instance, through the pipelined redigo path (one Split
// per instance and round) and through the workers of either client. One
// on a key that holds another Redis type is refused with ErrInvalid in
// that request and left as it was (a TYPE per instance, on that error
// path only, names the type).
func TestContendedAttemptIsOneRequest(t *testing.T) {
	addrs, _ := realN(t, 3)
	raw := make([]*goredis.Client, len(addrs))
	for i, a := range addrs {
		raw[i] = redistest.GoRedisClient(t, a)
	}
	type mk func(t *testing.T) (*redlock.Locker, func() int64)
	counted := func(newClient redistest.NewClient) mk {
		return func(t *testing.T) (*redlock.Locker, func() int64) {
			cs := make([]redisclient.Client, len(addrs))
			ccs := make([]*redistest.Counting, len(addrs))
			for i, a := range addrs {
				ccs[i] = &redistest.Counting{Client: newClient(t, a)}
				cs[i] = ccs[i]
			}
			lk, err := redlock.New(cs, redlock.Options{InstanceTimeout: countedTimeout})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lk.Close() })
			return lk, func() (n int64) {
				for _, c := range ccs {
					n += c.Requests()
				}
				return n
			}
		}
	}
	makers := map[string]mk{
		"redigo-pipelined": func(t *testing.T) (*redlock.Locker, func() int64) {
			lk, ccs := countingLocker(t, addrs, redlock.Options{InstanceTimeout: countedTimeout})
			return lk, func() (n int64) {
				for _, c := range ccs {
					n += c.splits.Load() + c.direct.Load()
				}
				return n
			}
		},
	}
	for _, c := range redistest.Clients {
		makers[c.Name+"-workers"] = counted(c.New)
	}
	ctx := context.Background()
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			key, hash := "contended1rt:"+name, "contended1rt:hash:"+name
			for _, r := range raw {
				r.Set(ctx, key, "other", time.Minute)
				r.HSet(ctx, hash, "field", "someone else's data")
			}
			lk, requests := mk(t)
			n := int64(len(addrs))
			// A new Locker dials its first connections from the workers.
			if l, err := lk.TryAcquire(ctx, "warm"); err != nil {
				t.Fatal(err)
			} else {
				l.Release(ctx)
			}

			redistest.CheckContended(t, lk, key, requests, n)
			// A TYPE per instance, on that error path only, names the type.
			redistest.CheckNotLock(t, lk, hash, "holds a hash, not a lock", requests, 2*n)
			for i, r := range raw {
				if v := r.Get(ctx, key).Val(); v != "other" {
					t.Errorf("instance %d: the held key holds %q, want the other owner's value", i, v)
				}
				if v := r.HGet(ctx, hash, "field").Val(); v != "someone else's data" {
					t.Errorf("instance %d: the hash under the key was changed to %q", i, v)
				}
			}
		})
	}
}

// oldServer is a client of a Redis before 7.0: it rejects SET with both NX
// and GET as a syntax error, as those servers do (it hides the Splitter of
// the client it wraps).
type oldServer struct {
	redisclient.Client
	refused atomic.Int64
}

func (o *oldServer) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) > 0 && args[0] == "SET" && args[len(args)-1] == "GET" {
		o.refused.Add(1)
		return nil, &redisclient.ReplyError{Msg: "ERR syntax error"}
	}
	return o.Client.Do(ctx, args...)
}

// TestInstanceWithoutSetNXGet: an instance that rejects SET NX GET is
// sent SET NX PX from then on, in the same attempt: the lock is acquired
// on a free key, a held key is ErrHeld, and a hash (found by TYPE, as
// before Redis 7.0) is ErrInvalid and left untouched.
func TestInstanceWithoutSetNXGet(t *testing.T) {
	addrs, _ := realN(t, 3)
	raw := make([]*goredis.Client, len(addrs))
	cs := make([]redisclient.Client, len(addrs))
	olds := make([]*oldServer, len(addrs))
	for i, a := range addrs {
		raw[i] = redistest.GoRedisClient(t, a)
		olds[i] = &oldServer{Client: redistest.GoRedis(t, a)}
		cs[i] = olds[i]
	}
	rec := logtest.New()
	lk, err := redlock.New(cs, redlock.Options{InstanceTimeout: testTimeout, Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "old", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire of a free key: %v", err)
	}
	for i, r := range raw {
		if v := r.Get(ctx, "old").Val(); v != l.Token() {
			t.Errorf("instance %d holds %q, want the token", i, v)
		}
	}
	if _, err := lk.TryAcquire(ctx, "old"); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("TryAcquire of a held key: %v, want ErrHeld", err)
	}
	for _, r := range raw {
		r.HSet(ctx, "oldhash", "f", "v")
	}
	if _, err := lk.TryAcquire(ctx, "oldhash"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("TryAcquire of a hash: %v, want ErrInvalid", err)
	}
	for i, r := range raw {
		if v := r.HGet(ctx, "oldhash", "f").Val(); v != "v" {
			t.Errorf("instance %d: the hash was changed to %q", i, v)
		}
		if n := olds[i].refused.Load(); n != 1 {
			t.Errorf("instance %d was sent SET NX GET %d times, want once", i, n)
		}
	}
	// The fallback is logged once per instance, at Info, naming it.
	got := rec.Find(redisclient.MsgSetGetFallback)
	if len(got) != len(cs) || len(rec.Records()) != len(cs) {
		t.Fatalf("records %v, want one %q per instance", rec.Records(), redisclient.MsgSetGetFallback)
	}
	servers := map[string]bool{}
	for _, r := range got {
		if r.Level != slog.LevelInfo || r.String("backend") != "redlock" || r.String("reason") == "" {
			t.Errorf("record %v: want INFO, backend redlock, a reason", r)
		}
		servers[r.String("server")] = true
	}
	for i, c := range cs {
		if !servers[c.String()] || !strings.Contains(c.String(), addrs[i]) {
			t.Errorf("no record names instance %d (%s, at %s): %v", i, c, addrs[i], servers)
		}
	}
}
