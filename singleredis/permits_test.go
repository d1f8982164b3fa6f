package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

// TestSemaphoreConformance runs the semaphore suite for singleredis on
// redis-server (miniredis's TIME does not follow its time travel, which
// the permits' expiries are kept in): go-redis plain, fenced and with
// fair wait, and the other clients fenced (the scripts are the same; the
// clients differ in how they carry them).
func TestSemaphoreConformance(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for i, c := range redistest.Clients {
		opts := []singleredis.Options{{Prefix: "fenced:", Fence: true}}
		if i == 0 {
			opts = append(opts, singleredis.Options{Prefix: "plain:"}, singleredis.Options{Prefix: "fair:", Fence: true, FairWait: true})
		}
		for _, o := range opts {
			t.Run(fmt.Sprintf("%s/fence=%v/fair=%v", c.Name, o.Fence, o.FairWait), func(t *testing.T) {
				conformance.RunSemaphore(t, harnessOpts(srv.Addr(), c.New, o, 300*time.Millisecond, nil))
			})
		}
	}
}

// TestPermitKeys: a semaphore is one hash at the mutex's key, with the
// limit, each permit's token and its expiry in the server's clock; the
// hash expires with its longest permit, loses a slot's fields when that
// permit is released, and is deleted with the last permit, leaving only
// the fence counter, which expires (FenceCounterTTL).
func TestPermitKeys(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "p:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	a, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(3), lockswap.WithTTL(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h, err := rdb.HGetAll(ctx, "p:pool").Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if h["limit"] != "3" || h["t0"] != a.Token() || h["t1"] != b.Token() || len(h) != 5 {
		t.Fatalf("hash = %v, want limit 3, t0 = %s, t1 = %s and their expiries", h, a.Token(), b.Token())
	}
	for slot, ttl := range []time.Duration{time.Minute, 2 * time.Minute} {
		e, _ := strconv.ParseInt(h[fmt.Sprintf("e%d", slot)], 10, 64)
		if left := time.UnixMilli(e).Sub(now); left <= 0 || left > ttl {
			t.Errorf("slot %d expires %v after the server's clock, want within its TTL %v", slot, left, ttl)
		}
	}
	if pttl := rdb.PTTL(ctx, "p:pool").Val(); pttl <= time.Minute || pttl > 2*time.Minute {
		t.Errorf("the hash's PTTL is %v, want that of its longest permit (2m)", pttl)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := rdb.HGetAll(ctx, "p:pool").Val(); len(h) != 3 || h["t1"] != "" || h["e1"] != "" {
		t.Errorf("after releasing slot 1 the hash is %v, want limit, t0 and e0 only", h)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	keys := rdb.Keys(ctx, "*").Val()
	if len(keys) != 1 || keys[0] != singleredis.FenceKey("p:pool") {
		t.Errorf("after the last permit the keys are %v, want the fence counter %s only", keys, singleredis.FenceKey("p:pool"))
	}
	if pttl := rdb.PTTL(ctx, singleredis.FenceKey("p:pool")).Val(); pttl <= 0 || pttl > singleredis.FenceCounterTTL {
		t.Errorf("the fence counter's PTTL is %v, want at most FenceCounterTTL", pttl)
	}
}

// TestPermitRefusals: a key that holds a mutex, another Redis type, or a
// hash that is no semaphore is refused with ErrInvalid naming it, and
// left as it was; a mutex on a semaphore's key is refused the same way.
func TestPermitRefusals(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	for _, fence := range []bool{false, true} {
		lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: fence})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Close()
		rdb.FlushAll(ctx)
		rdb.Set(ctx, "str", "someone", time.Minute)
		rdb.LPush(ctx, "list", "x")
		rdb.HSet(ctx, "hash", "field", "x")
		// Hashes of someone else's that have a limit field: other fields
		// beside it, or a limit that is no integer from 1 to MaxPermits.
		rdb.HSet(ctx, "quota", "limit", "100", "owner", "alice")
		rdb.HSet(ctx, "quota2", "limit", "2", "owner", "bob")
		rdb.HSet(ctx, "huge", "limit", "30000000")
		rdb.HSet(ctx, "inf", "limit", "inf")
		foreign := []string{"hash", "quota", "quota2", "huge", "inf"}
		before := map[string]map[string]string{}
		for _, key := range foreign {
			before[key] = rdb.HGetAll(ctx, key).Val()
		}
		for _, key := range append([]string{"str", "list"}, foreign...) {
			_, err := lk.TryAcquire(ctx, key, lockswap.WithPermits(2))
			if !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("fence=%v: a permit of %q: err = %v, want ErrInvalid", fence, key, err)
			}
		}
		if v := rdb.Get(ctx, "str").Val(); v != "someone" {
			t.Errorf("the mutex's key was changed to %q", v)
		}
		for _, key := range foreign {
			if h := rdb.HGetAll(ctx, key).Val(); fmt.Sprint(h) != fmt.Sprint(before[key]) || rdb.PTTL(ctx, key).Val() != -1 {
				t.Errorf("the foreign hash %s was changed from %v to %v (PTTL %v)", key, before[key], h, rdb.PTTL(ctx, key).Val())
			}
		}
		p, err := lk.TryAcquire(ctx, "sem", lockswap.WithPermits(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TryAcquire(ctx, "sem"); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("fence=%v: the mutex of a semaphore's key: err = %v, want ErrInvalid", fence, err)
		}
		if err := p.Release(ctx); err != nil {
			t.Errorf("the permit after the refused mutex: %v", err)
		}
	}
}

// TestPermitReleaseShortensKey: releasing the longest-lived permit brings
// the hash's expiry down to the longest live one's, so that once the
// others expire the key is free for its mutex, as memlock's is.
func TestPermitReleaseShortensKey(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	long, err := lk.TryAcquire(ctx, "k", lockswap.WithPermits(2), lockswap.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.TryAcquire(ctx, "k", lockswap.WithPermits(2), lockswap.WithTTL(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if pttl := rdb.PTTL(ctx, "k").Val(); pttl <= 0 || pttl > 300*time.Millisecond {
		t.Fatalf("after releasing the hour-long permit the hash's PTTL is %v, want the live permit's (at most 300ms)", pttl)
	}
	// Once the short permit has expired, the key takes its mutex.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
		if err == nil {
			m.Release(ctx)
			return
		}
		if !errors.Is(err, lockswap.ErrInvalid) || time.Now().After(deadline) {
			t.Fatalf("the mutex after every permit ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPermitACLDenialLeavesNothing: a user whose ACL lacks one write the
// fenced permit acquire needs (SET of the fence counter, HSET, PEXPIRE)
// gets ErrInvalid naming the permission, and the refused acquire leaves
// no permit and no key without an expiry: a correctly configured user
// then gets every permit. With FairWait, Acquire takes a free permit
// through the fair wait's script, which keeps the same order of writes.
func TestPermitACLDenialLeavesNothing(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	admin := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	const (
		rights     = "+set +get +del +pexpire +type +exists +time +hgetall +hset +hdel +eval +evalsha"
		fairRights = rights + " +pttl +lindex +lpop +rpush +hget +hexists +hlen +publish +subscribe"
	)
	good, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "app:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	for _, fair := range []bool{false, true} {
		for _, drop := range []string{"+set", "+hset", "+pexpire"} {
			t.Run(fmt.Sprintf("fair=%v/%s", fair, drop), func(t *testing.T) {
				r := rights
				if fair {
					r = fairRights
				}
				lk := aclLocker(t, srv.Addr(), admin, r, drop, fair)
				acquire := lk.TryAcquire
				if fair {
					acquire = lk.Acquire // through the fair wait's script
				}
				for _, key := range []string{"new", "live"} {
					var held lockswap.Lock
					if key == "live" {
						if held, err = good.TryAcquire(ctx, key, lockswap.WithPermits(2), lockswap.WithTTL(time.Minute)); err != nil {
							t.Fatal(err)
						}
					}
					actx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := acquire(actx, key, lockswap.WithPermits(2), lockswap.WithTTL(time.Minute))
					cancel()
					if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "permission") {
						t.Errorf("%s: err = %v, want ErrInvalid naming the permission", key, err)
					}
					if pttl := admin.PTTL(ctx, "app:"+key).Val(); pttl == -1 {
						t.Errorf("%s: the hash was left without an expiry", key)
					}
					// Every permit the refused call did not take is free.
					var ls []lockswap.Lock
					for len(ls)+btoi(held != nil) < 2 {
						l, err := good.TryAcquire(ctx, key, lockswap.WithPermits(2), lockswap.WithTTL(time.Minute))
						if err != nil {
							t.Fatalf("%s: permit %d of a correct user after the refused call: %v", key, len(ls)+1, err)
						}
						ls = append(ls, l)
					}
					for _, l := range append(ls, held) {
						if l != nil {
							l.Release(ctx)
						}
					}
				}
			})
		}
	}
}

// aclLocker returns a fenced Locker (prefix app:) of a user that has
// rights but drop, on the server at addr, set up by admin; with fair, a
// Locker with FairWait, whose user may also use the fair wait's keys and
// channels. The test closes it.
func aclLocker(t *testing.T, addr string, admin *redis.Client, rights, drop string, fair bool) *singleredis.Locker {
	t.Helper()
	args := []any{"ACL", "SETUSER", "locker", "reset", "on", ">pw", "~app:*", "~{app:*}:fence", "-@all"}
	if fair {
		args = append(args, "~{app:*}:fairq", "~{app:*}:fairw", "&app:lockswap:fairwait:*")
	}
	for _, r := range strings.Fields(rights) {
		if r != drop {
			args = append(args, r)
		}
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(&redis.Options{Addr: addr, Username: "locker", Password: "pw", MaxRetries: -1})
	t.Cleanup(func() { uc.Close() })
	lk, err := singleredis.New(goredis.New(uc), singleredis.Options{Prefix: "app:", Fence: true, FairWait: fair})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFairWaiterLeavesWhenKeyBecomesSemaphore: a fair mutex waiter whose
// key becomes a counting semaphore's while it waits is refused with
// ErrInvalid and takes its registration out of the queue, so it holds up
// no later waiter.
func TestFairWaiterLeavesWhenKeyBecomesSemaphore(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newLk := func() *singleredis.Locker {
		lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{FairWait: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lk.Close() })
		return lk
	}
	a, w := newLk(), newLk()
	if _, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Acquire(ctx, "k", lockswap.WithTTL(time.Second))
		done <- err
	}()
	for rdb.HLen(ctx, singleredis.FairWaitersKey("k")).Val() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the waiter never registered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	rdb.Del(ctx, "k") // the mutex is gone (as if expired), and a semaphore takes the key
	p, err := a.TryAcquire(ctx, "k", lockswap.WithPermits(2), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	if err := <-done; !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("the waiter: err = %v, want ErrInvalid (the key is a semaphore's)", err)
	}
	if n := rdb.HLen(ctx, singleredis.FairWaitersKey("k")).Val(); n != 0 {
		t.Errorf("the refused waiter left %d registrations", n)
	}
}

// TestFairWaitACLDenialLeavesExpiries: a fair waiter (mutex or permit)
// whose ACL refuses RPUSH, and a permit holder whose ACL refuses PTTL as
// its release hands the permit over, stop their scripts half-way, and
// the registrations hash still expires. Found by review: the hash was
// made by an HSET whose PEXPIRE came after the refused command.
func TestFairWaitACLDenialLeavesExpiries(t *testing.T) {
	const fairRights = "+set +get +del +pexpire +type +exists +time +hgetall +hset +hdel +eval +evalsha +pttl +lindex +lpop +rpush +hget +hexists +hlen +publish +subscribe"
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	admin := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	good := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "app:", Fence: true})
	expires := func(t *testing.T, key string) {
		t.Helper()
		for _, k := range []string{singleredis.FairWaitersKey("app:" + key), singleredis.FairQueueKey("app:" + key)} {
			if admin.PTTL(ctx, k).Val() == -1 {
				t.Errorf("%s left without an expiry: %v", k, admin.HGetAll(ctx, k).Val())
			}
		}
	}
	for _, kind := range []struct {
		name string
		opts []lockswap.Option
	}{{"mutex", nil}, {"permit", []lockswap.Option{lockswap.WithPermits(1)}}} {
		t.Run(kind.name+"/register-without-rpush", func(t *testing.T) {
			key := "deny-rpush-" + kind.name
			held, err := good.TryAcquire(ctx, key, append(kind.opts, lockswap.WithTTL(time.Minute))...)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			lk := aclLocker(t, srv.Addr(), admin, fairRights, "+rpush", true)
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = lk.Acquire(actx, key, append(kind.opts, lockswap.WithTTL(time.Minute))...)
			cancel()
			if !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("acquire without +rpush: err = %v, want ErrInvalid", err)
			}
			expires(t, key)
		})
	}
	t.Run("permit/hand-over-without-pttl", func(t *testing.T) {
		key := "deny-pttl"
		raw := redistest.GoRedisClient(t, srv.Addr())
		u := aclLocker(t, srv.Addr(), admin, fairRights, "+pttl", true)
		held, err := u.Acquire(ctx, key, lockswap.WithPermits(1), lockswap.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		acquireAsync(wctx, good, key, lockswap.WithPermits(1), lockswap.WithTTL(time.Minute))
		waitFor(t, 5*time.Second, "the waiter registered", func() bool { return queued(raw, "app:"+key) == 1 })
		if err := held.Release(ctx); err == nil {
			t.Error("a release without +pttl that had a permit to hand over succeeded, want the permission error")
		}
		expires(t, key)
	})
}

// TestFairWaitForeignQueueKeysUntouched: a fair waiter (mutex or permit)
// whose queue keys hold someone else's data of another type is refused
// with ErrInvalid and leaves that data as it was, without an expiry it
// did not have. Found by review: the registration path set the keys'
// expiries before a command that checks their type.
func TestFairWaitForeignQueueKeysUntouched(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	holder := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	w := fairLocker(t, redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	for _, kind := range []struct {
		name string
		opts []lockswap.Option
	}{{"mutex", nil}, {"permit", []lockswap.Option{lockswap.WithPermits(1)}}} {
		for _, foreign := range []func(string) string{singleredis.FairWaitersKey, singleredis.FairQueueKey} {
			key := "foreign-" + kind.name + "-" + strings.TrimPrefix(foreign(""), "{}")
			t.Run(key, func(t *testing.T) {
				held, err := holder.TryAcquire(ctx, key, append(kind.opts, lockswap.WithTTL(time.Minute))...)
				if err != nil {
					t.Fatal(err)
				}
				defer held.Release(ctx)
				if err := raw.Set(ctx, foreign(key), "user data", 0).Err(); err != nil {
					t.Fatal(err)
				}
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err = w.Acquire(actx, key, kind.opts...)
				cancel()
				if !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("acquire with %s holding a string: err = %v, want ErrInvalid", foreign(key), err)
				}
				if v, pttl := raw.Get(ctx, foreign(key)).Val(), raw.PTTL(ctx, foreign(key)).Val(); v != "user data" || pttl != -1 {
					t.Errorf("%s: %q with PTTL %v, want the user's data untouched, without an expiry", foreign(key), v, pttl)
				}
			})
		}
	}
}
