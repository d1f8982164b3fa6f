package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// callerKey marks the caller's context: a request made on the caller's
// time carries it (the request contexts keep the caller's values), one made
// in the background does not (the Locker's background group starts from
// context.Background).
type callerKey struct{}

// stallClient wraps a client and, when told to, does not answer the
// compare-and-delete (release) or TYPE requests: they wait until their
// context ends, as a request to an instance that stopped answering does.
// It records the deadline of every stalled request made on the caller's
// time. It hides the wrapped client's Splitter: requests go through these
// methods.
type stallClient struct {
	redisclient.Client
	stallRelease, stallType atomic.Bool

	mu     sync.Mutex
	caller []stalledReq
}

type stalledReq struct {
	op       string
	deadline time.Time
	ok       bool // the context had a deadline
}

func (c *stallClient) stall(ctx context.Context, op string) error {
	if ctx.Value(callerKey{}) != nil {
		d, ok := ctx.Deadline()
		c.mu.Lock()
		c.caller = append(c.caller, stalledReq{op, d, ok})
		c.mu.Unlock()
	}
	// The bound only keeps a broken test from hanging: every request
	// context of the Locker ends by itself.
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errors.New("stallClient: the request context did not end within 10 s")
	}
}

// callerRequests returns the stalled requests made on the caller's time.
func (c *stallClient) callerRequests() []stalledReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]stalledReq(nil), c.caller...)
}

func (c *stallClient) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	if s == redisscript.CompareAndDelete && c.stallRelease.Load() {
		return nil, c.stall(ctx, "release")
	}
	return c.Client.Run(ctx, s, keys, args...)
}

func (c *stallClient) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) > 0 && args[0] == "TYPE" && c.stallType.Load() {
		return nil, c.stall(ctx, "TYPE")
	}
	if len(args) > 0 && args[0] == "SET" && args[len(args)-1] == "GET" && c.stallType.Load() {
		// As a Redis before 7.0 does: then the first attempt on a held
		// key asks for its type.
		return nil, &redisclient.ReplyError{Msg: "ERR syntax error"}
	}
	return c.Client.Do(ctx, args...)
}

// TestFailedAttemptKeepsDeadline: a TryAcquire that fails (the key is held
// on 2 of 3 instances) returns within lockswap.DeadlineGrace of its
// caller's deadline even when the instances stop answering the requests
// that come after the SET: the undo of the instance that said OK, and the
// TYPE check of those that hold the key. The request contexts of
// internal/attempt already end a grace after the caller's deadline, so no
// request on the caller's time may have a later deadline; when that
// context has ended before the undo, the undo goes to the background
// entirely, and removes the key there once the instance answers again.
func TestFailedAttemptKeepsDeadline(t *testing.T) {
	// Scheduling on a loaded machine running -race; the defect this catches
	// returned 800 ms late.
	const slack = 250 * time.Millisecond
	cases := []struct {
		name            string
		stallType       bool
		wantCallerUndo  bool // the undo's round runs on the caller's time
		wantCallerTypes bool
	}{
		// The SET answers at once and the caller's deadline is far: the
		// undo of instance 0 runs on the caller's time, bounded by the
		// request context's deadline (not that plus another grace).
		{name: "undo", wantCallerUndo: true},
		// The TYPE check (on instances without SET NX GET) takes the
		// request context's whole time: it ends with it, and the undo is
		// left to the background.
		{name: "type check", stallType: true, wantCallerTypes: true},
	}
	for _, tc := range cases {
		for _, cl := range redistest.Clients {
			t.Run(tc.name+"/"+cl.Name, func(t *testing.T) {
				addrs, _ := miniredisN(t, 3)
				raws := make([]*goredis.Client, len(addrs))
				cs := make([]redisclient.Client, len(addrs))
				scs := make([]*stallClient, len(addrs))
				for i, a := range addrs {
					raws[i] = redistest.GoRedisClient(t, a)
					scs[i] = &stallClient{Client: cl.New(t, a)}
					cs[i] = scs[i]
				}
				// A 1 s instance timeout makes the cleanup round 1 s: only
				// the caller's deadline can bound it below that.
				lk, err := redlock.New(cs, redlock.Options{InstanceTimeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lk.Close() })
				bg := ctxT(t)
				// Connect first, so that the timed attempt dials nothing.
				warm, err := lk.TryAcquire(bg, "warm-up", lockswap.WithTTL(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				if err := warm.Release(bg); err != nil {
					t.Fatal(err)
				}
				for _, rc := range raws[1:] {
					if err := rc.Set(bg, "k", "other", time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
				scs[0].stallRelease.Store(true)
				if tc.stallType {
					scs[1].stallType.Store(true)
					scs[2].stallType.Store(true)
				}

				deadline := time.Now().Add(300 * time.Millisecond)
				ctx, cancel := context.WithDeadline(context.WithValue(bg, callerKey{}, true), deadline)
				defer cancel()
				_, err = lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
				returned := time.Now()
				if !errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("TryAcquire with the key held on 2 of 3 instances: %v, want ErrHeld", err)
				}
				if over := returned.Sub(deadline); over > lockswap.DeadlineGrace+slack {
					t.Errorf("TryAcquire returned %v after its deadline, want at most DeadlineGrace (%v)", over.Round(time.Millisecond), lockswap.DeadlineGrace)
				}
				bound := deadline.Add(lockswap.DeadlineGrace)
				var undos, types int
				for i, sc := range scs {
					for _, r := range sc.callerRequests() {
						switch r.op {
						case "release":
							undos++
						case "TYPE":
							types++
						}
						if !r.ok || r.deadline.After(bound) {
							t.Errorf("instance %d: %s request on the caller's time with deadline %v (set: %v): %v past the caller's deadline, want at most DeadlineGrace (%v)",
								i, r.op, r.deadline, r.ok, r.deadline.Sub(deadline), lockswap.DeadlineGrace)
						}
					}
				}
				if got := undos > 0; got != tc.wantCallerUndo {
					t.Errorf("%d undo requests on the caller's time, want some: %v", undos, tc.wantCallerUndo)
				}
				if got := types > 0; got != tc.wantCallerTypes {
					t.Errorf("%d TYPE requests on the caller's time, want some: %v", types, tc.wantCallerTypes)
				}

				// The instance answers again: the background removes the
				// key the attempt set there, and only that.
				for _, sc := range scs {
					sc.stallRelease.Store(false)
					sc.stallType.Store(false)
				}
				waitFor(t, "instance 0 no longer holds the key", func() bool { return raws[0].Exists(bg, "k").Val() == 0 })
				waitBackground(t, lk)
				for i, rc := range raws[1:] {
					if v := rc.Get(bg, "k").Val(); v != "other" {
						t.Errorf("instance %d: the key holds %q, want the other owner's value", i+1, v)
					}
				}
			})
		}
	}
}
