package singleredis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestReleaseHandsOverInOneRequest: releasing a lock while a goroutine of
// the same Locker waits for the key releases it and takes it for the waiter
// in one request (the waiter sends nothing of its own); the waiter's lock is a
// normal one: its token is in Redis, its deadline within its TTL, its fence
// the next one, and it releases.
func TestReleaseHandsOverInOneRequest(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	for _, fence := range []bool{false, true} {
		for _, c := range redistest.Clients {
			t.Run(c.Name+"/fence="+strconv.FormatBool(fence), func(t *testing.T) {
				ctx, key := context.Background(), "handover1rt:"+c.Name+strconv.FormatBool(fence)
				cc := &redistest.Counting{Client: c.New(t, srv.Addr())}
				lk, err := singleredis.New(cc, singleredis.Options{Fence: fence})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lk.Close() })
				held, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				const ttl = 7 * time.Second
				out := queuetest.QueueBehind(t, ctx, lk, key, ttl)
				before := cc.Requests()
				if err := held.Release(ctx); err != nil {
					t.Fatalf("release with a waiter: %v", err)
				}
				// The hand-over ran on the server before Release returned:
				// the waiter's TTL counts from then at the latest, less the
				// drift the deadline keeps back, plus 1 ms for the server's
				// clock read in whole milliseconds. (The time before the
				// call is no bound: on a busy machine the request may be
				// sent later than the call by more than the drift.)
				released := time.Now()
				latest := released.Add(ttl - lockstate.Drift(ttl) + time.Millisecond)
				r := <-out
				if r.Err != nil {
					t.Fatalf("waiter: %v", r.Err)
				}
				if n := cc.Requests() - before; n != 1 {
					t.Errorf("%d requests for the release and the waiter's acquisition, want 1", n)
				}
				if v, _ := raw.Get(ctx, key).Result(); v != r.Lock.Token() {
					t.Errorf("key holds %q, want the waiter's token %q", v, r.Lock.Token())
				}
				if left := time.Until(r.Lock.Deadline()); left <= 0 || r.Lock.Deadline().After(latest) {
					t.Errorf("waiter's deadline %v after the release returned, want within its own TTL %v less the drift %v", r.Lock.Deadline().Sub(released), ttl, lockstate.Drift(ttl))
				}
				if pttl, _ := raw.PTTL(ctx, key).Result(); pttl <= 0 || pttl > ttl {
					t.Errorf("key's PTTL %v, want the waiter's TTL %v", pttl, ttl)
				}
				f1, ok1 := held.Fence()
				f2, ok2 := r.Lock.Fence()
				if ok1 != fence || ok2 != fence || (fence && f2 <= f1) {
					t.Errorf("fences (%d, %v) then (%d, %v), want strictly increasing when fenced, absent otherwise", f1, ok1, f2, ok2)
				}
				if err := r.Lock.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if n, _ := raw.Exists(ctx, key).Result(); n != 0 {
					t.Error("the handed-over lock's release left the key behind")
				}
			})
		}
	}
}

// TestHandOverOfLostLock: a stale release with a local waiter deletes
// nothing, reports the loss and leaves the waiter waiting
// (queuetest.StaleReleaseWithWaiter); the key keeps the other client's
// token.
func TestHandOverOfLostLock(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	s := queuetest.Subject{
		NewLocker: func(t *testing.T) lockswap.Locker {
			return newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
		},
		Waiting: func(lk lockswap.Locker, key string) int { return singleredis.Waiting(lk.(*singleredis.Locker), key) },
	}
	queuetest.StaleReleaseWithWaiter(t, s, 200*time.Millisecond, func(t *testing.T, key string, theirs lockswap.Lock) {
		if v, _ := raw.Get(context.Background(), key).Result(); v != theirs.Token() {
			t.Fatalf("key holds %q after the stale release, want the other client's token", v)
		}
	})
}

// TestHandOverWithForeignFenceCounter: when the fence counter stops being
// ours (someone wrote other data there) while a fenced lock is held, a
// release with a local waiter still releases (and says so), the waiter's
// attempt fails with ErrInvalid, and the counter is left as it was.
func TestHandOverWithForeignFenceCounter(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	for name, spoil := range map[string]func(ctx context.Context, k string) error{
		"string": func(ctx context.Context, k string) error { return raw.Set(ctx, k, "not a number", 0).Err() },
		"hash": func(ctx context.Context, k string) error {
			if err := raw.Del(ctx, k).Err(); err != nil {
				return err
			}
			return raw.HSet(ctx, k, "f", "v").Err()
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, key := context.Background(), "foreign-fence-"+name
			lk := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{Fence: true})
			held, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			out := queuetest.QueueBehind(t, ctx, lk, key, 10*time.Second)
			fk := singleredis.FenceKey(key)
			if err := spoil(ctx, fk); err != nil {
				t.Fatal(err)
			}
			typ, _ := raw.Type(ctx, fk).Result()
			dump, _ := raw.Dump(ctx, fk).Result()
			if err := held.Release(ctx); err != nil {
				t.Fatalf("release with a waiter and a foreign fence counter: %v, want nil (our key was deleted)", err)
			}
			if n, _ := raw.Exists(ctx, key).Result(); n != 0 {
				t.Error("the lock key is still there")
			}
			r := <-out
			if !errors.Is(r.Err, lockswap.ErrInvalid) {
				t.Fatalf("waiter: (%v, %v), want ErrInvalid naming the counter", r.Lock, r.Err)
			}
			if typ2, _ := raw.Type(ctx, fk).Result(); typ2 != typ {
				t.Errorf("counter type %s after, %s before", typ2, typ)
			}
			if dump2, _ := raw.Dump(ctx, fk).Result(); dump2 != dump {
				t.Error("the foreign counter was changed")
			}
		})
	}
}

// TestCancelMidRequest: an acquisition cancelled while its request is on
// the way to Redis leaves no lock behind (redistest.CancelMidRequest).
func TestCancelMidRequest(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		for _, fence := range []bool{false, true} {
			t.Run(c.Name+"/fence="+strconv.FormatBool(fence), func(t *testing.T) {
				redistest.CancelMidRequest(t, []string{srv.Addr()}, func(t *testing.T, addrs []string) lockswap.Locker {
					return newLocker(t, addrs[0], c.New, singleredis.Options{Fence: fence, Prefix: c.Name + strconv.FormatBool(fence) + ":"})
				})
			})
		}
	}
}
