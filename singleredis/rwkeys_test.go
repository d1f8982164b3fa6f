package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestRWKeys: a read-write lock is one hash at the mutex's key: w and we
// for the write hold, r:<token> for each read hold, q:<id> for a waiting
// writer's mark, expiries in the server's clock; the hash expires with
// its latest live hold or mark, loses a hold's fields at its release, is
// deleted with the last one, and leaves only the fence counter, which
// expires.
func TestRWKeys(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "p:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	a, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// A writer waits 3 minutes at most: its mark lasts as long.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	writer := make(chan error, 1)
	go func() {
		w, err := lk.Acquire(wctx, "doc", lockswap.WithWrite(), lockswap.WithTTL(4*time.Minute),
			lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
		if err == nil {
			err = w.Release(ctx)
		}
		writer <- err
	}()
	var h map[string]string
	deadline := time.Now().Add(10 * time.Second)
	for len(h) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting writer left no mark: hash %v", h)
		}
		h = rdb.HGetAll(ctx, "p:doc").Val()
	}
	now := rdb.Time(ctx).Val()
	var mark string
	for f, v := range h {
		e, _ := strconv.ParseInt(v, 10, 64)
		left := time.UnixMilli(e).Sub(now)
		switch {
		case f == "r:"+a.Token() && left > 0 && left <= time.Minute:
		case f == "r:"+b.Token() && left > 0 && left <= 2*time.Minute:
		case strings.HasPrefix(f, "q:") && len(f) == 34 && left > 2*time.Minute && left <= 3*time.Minute:
			mark = f
		default:
			t.Errorf("field %s = %s (%v left): want r:<token> with its TTL, q:<id> with the writer's wait", f, v, left)
		}
	}
	if pttl := rdb.PTTL(ctx, "p:doc").Val(); pttl <= 2*time.Minute || pttl > 3*time.Minute {
		t.Errorf("the hash's PTTL is %v, want that of the writer's mark (3m)", pttl)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := rdb.HGetAll(ctx, "p:doc").Val(); len(h) != 2 || h["r:"+b.Token()] != "" {
		t.Errorf("after releasing a read hold the hash is %v, want the other read hold and the mark", h)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-writer; err != nil {
		t.Fatalf("the writer after the readers released: %v", err)
	}
	keys := rdb.Keys(ctx, "*").Val()
	if len(keys) != 1 || keys[0] != singleredis.FenceKey("p:doc") {
		t.Errorf("after the writer's grant (which drops its mark %s) and release the keys are %v, want the fence counter only", mark, keys)
	}
	if pttl := rdb.PTTL(ctx, singleredis.FenceKey("p:doc")).Val(); pttl <= 0 || pttl > singleredis.FenceCounterTTL {
		t.Errorf("the fence counter's PTTL is %v, want at most FenceCounterTTL", pttl)
	}
	// A write hold: w and we.
	w, err := lk.TryAcquire(ctx, "doc", lockswap.WithWrite(), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if h := rdb.HGetAll(ctx, "p:doc").Val(); len(h) != 2 || h["w"] != w.Token() || h["we"] == "" {
		t.Errorf("hash of a write hold = %v, want w = its token and we", h)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRWDeadFieldsDropped: the fields of holds that expired without a
// release go at the next acquire, so a hash under steady use by crashing
// readers does not grow.
func TestRWDeadFieldsDropped(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	long, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 { // readers that "crash": never released
		if _, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rdb.HGetAll(ctx, "doc").Val()); n != 6 {
		t.Fatalf("%d fields, want 6 read holds", n)
	}
	// Wait (bounded) for the short holds to end on the server's clock.
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		h := rdb.HGetAll(ctx, "doc").Val()
		l.Release(ctx)
		if len(h) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead read holds stayed in the hash: %v", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
	long.Release(ctx)
}

// TestRWRefusals: a key that holds a mutex, another Redis type, a
// semaphore, or a hash that is no read-write lock is refused with
// ErrInvalid naming it, and left as it was; a mutex and a permit on a
// read-write lock's key are refused the same way.
func TestRWRefusals(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	token := strings.Repeat("ab", 16)
	for _, fence := range []bool{false, true} {
		lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: fence})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Close()
		rdb.FlushAll(ctx)
		rdb.Set(ctx, "str", "someone", time.Minute)
		rdb.LPush(ctx, "list", "x")
		// Hashes of someone else's, some with the read-write lock's field
		// names: a bad token, a w without we, an odd field beside them.
		rdb.HSet(ctx, "hash", "field", "x")
		rdb.HSet(ctx, "badtoken", "w", "alice", "we", "1")
		rdb.HSet(ctx, "nowe", "w", token)
		rdb.HSet(ctx, "odd", "r:"+token, "1", "owner", "bob")
		rdb.HSet(ctx, "shortid", "q:abc", "1")
		foreign := []string{"hash", "badtoken", "nowe", "odd", "shortid"}
		before := map[string]map[string]string{}
		for _, key := range foreign {
			before[key] = rdb.HGetAll(ctx, key).Val()
		}
		sem, err := lk.TryAcquire(ctx, "sem", lockswap.WithPermits(2))
		if err != nil {
			t.Fatal(err)
		}
		for _, opt := range []lockswap.Option{lockswap.WithRead(), lockswap.WithWrite()} {
			for _, key := range append([]string{"str", "list", "sem"}, foreign...) {
				_, err := lk.TryAcquire(ctx, key, opt)
				if !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("fence=%v: a hold of %q: err = %v, want ErrInvalid", fence, key, err)
				}
				if key == "sem" && !strings.Contains(fmt.Sprint(err), "semaphore") {
					t.Errorf("fence=%v: a hold of a semaphore's key: err = %v, want it named", fence, err)
				}
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
		if err := sem.Extend(ctx, time.Minute); err != nil {
			t.Errorf("the permit after the refused holds: %v", err)
		}
		sem.Release(ctx)
		r, err := lk.TryAcquire(ctx, "rw", lockswap.WithRead())
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range [][]lockswap.Option{nil, {lockswap.WithPermits(2)}} {
			if _, err := lk.TryAcquire(ctx, "rw", opts...); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("fence=%v: a mutex or permit (%d options) on a read-write lock's key: err = %v, want ErrInvalid", fence, len(opts), err)
			}
		}
		if err := r.Release(ctx); err != nil {
			t.Errorf("the read hold after the refused mutex and permit: %v", err)
		}
	}
}

// TestRWACLDenialLeavesNothing: a user whose ACL lacks one write the
// fenced read-write acquire needs (SET of the fence counter, HSET,
// PEXPIRE) gets ErrInvalid naming the permission for a read and a write
// hold, and leaves no hold and no key without an expiry: a correctly
// configured user then takes the write hold once its own holds are gone.
func TestRWACLDenialLeavesNothing(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	admin := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	const rights = "+set +get +del +pexpire +type +exists +time +hgetall +hset +hdel +eval +evalsha"
	good, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Prefix: "app:", Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	for _, drop := range []string{"+set", "+hset", "+pexpire"} {
		t.Run(drop, func(t *testing.T) {
			lk := aclLocker(t, srv.Addr(), admin, rights, drop, false)
			for i, mode := range []lockswap.Option{lockswap.WithRead(), lockswap.WithWrite()} {
				key := fmt.Sprintf("new%d", i)
				_, err := lk.TryAcquire(ctx, key, mode, lockswap.WithTTL(time.Minute))
				if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "permission") {
					t.Errorf("a hold of a new key: err = %v, want ErrInvalid naming the permission", err)
				}
				if pttl := admin.PTTL(ctx, "app:"+key).Val(); pttl == -1 {
					t.Errorf("the hash was left without an expiry")
				}
				w, err := good.TryAcquire(ctx, key, lockswap.WithWrite(), lockswap.WithTTL(time.Minute))
				if err != nil {
					t.Fatalf("the write hold of a correct user after the refused call: %v (it left a hold)", err)
				}
				w.Release(ctx)
			}
			// A live read hold: a refused read hold beside it leaves nothing.
			r, err := good.TryAcquire(ctx, "live", lockswap.WithRead(), lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lk.TryAcquire(ctx, "live", lockswap.WithRead(), lockswap.WithTTL(time.Minute)); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("a read hold beside a live one: err = %v, want ErrInvalid", err)
			}
			if pttl := admin.PTTL(ctx, "app:live").Val(); pttl == -1 {
				t.Errorf("the live hash was left without an expiry")
			}
			r.Release(ctx)
			w, err := good.TryAcquire(ctx, "live", lockswap.WithWrite(), lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatalf("the write hold once the live reader released: %v (the refused call left a hold)", err)
			}
			w.Release(ctx)
		})
	}
}

// TestRWManyDeadFields: ended holds and marks, however many (past Lua's
// unpack limit of about 8000), are removed by the next acquire, granted
// or refused, and do not wedge the key.
func TestRWManyDeadFields(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	seed := func(key string) {
		args := make([]any, 0, 2*9000)
		for i := range 9000 { // ended in 1970
			kind := "r:"
			if i%2 == 1 {
				kind = "q:"
			}
			args = append(args, fmt.Sprintf("%s%032x", kind, i), "1")
		}
		if err := rdb.HSet(ctx, key, args...).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.PExpire(ctx, key, time.Minute)
	}
	seed("granted")
	r, err := lk.TryAcquire(ctx, "granted", lockswap.WithRead())
	if err != nil {
		t.Fatalf("a read hold of a key with 9000 ended fields: %v", err)
	}
	if n := rdb.HLen(ctx, "granted").Val(); n != 1 {
		t.Errorf("after the grant the hash has %d fields, want the read hold's only", n)
	}
	r.Release(ctx)
	w, err := lk.TryAcquire(ctx, "refused", lockswap.WithWrite(), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	seed("refused")
	if _, err := lk.TryAcquire(ctx, "refused", lockswap.WithRead()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a read hold beside a write hold and 9000 ended fields: err = %v, want ErrHeld", err)
	}
	if n := rdb.HLen(ctx, "refused").Val(); n != 2 {
		t.Errorf("after the refused attempt the hash has %d fields, want the write hold's two", n)
	}
	w.Release(ctx)
}

// TestRWUnmarkShortensKey: a writer's Acquire that gives up removes its
// mark, and the hash's expiry comes down to its live read hold's, so that
// the key is free for other kinds once that hold ends.
func TestRWUnmarkShortensKey(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	r, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	if _, err := lk.Acquire(ctx, "doc", lockswap.WithWrite(), lockswap.WithTTL(time.Hour), lockswap.WithRetry(lockswap.NoRetry())); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("the one-shot writer: err = %v, want ErrHeld", err)
	}
	deadline := time.Now().Add(20 * time.Second) // the mark goes in the background
	for rdb.HLen(ctx, "doc").Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the given-up writer's mark stayed: %v", rdb.HGetAll(ctx, "doc").Val())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if pttl := rdb.PTTL(ctx, "doc").Val(); pttl <= 0 || pttl > time.Minute {
		t.Errorf("after the mark went the hash's PTTL is %v, want the read hold's (at most 1m), not the writer's hour", pttl)
	}
}

// TestRWOnLargeSemaphoreNamed: a read-write hold on a semaphore's key is
// refused naming the semaphore also when the hash is large (its fields in
// no particular order).
func TestRWOnLargeSemaphoreNamed(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	for range 600 {
		if _, err := lk.TryAcquire(ctx, "pool", lockswap.WithPermits(1000), lockswap.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = lk.TryAcquire(ctx, "pool", lockswap.WithRead())
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "semaphore") {
		t.Errorf("a read hold of a large semaphore's key: err = %v, want ErrInvalid naming the semaphore", err)
	}
}

// TestRWLapsedMarkRenewed: a writer whose mark ended (its retry delay
// longer than the mark) marks the key again at its next attempt: the
// cleanup of ended fields must not take the new mark with the old one.
func TestRWLapsedMarkRenewed(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	rdb := redistest.GoRedisClient(t, srv.Addr())
	lk, err := singleredis.New(redistest.GoRedis(t, srv.Addr()), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	r, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead(), lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	id := strings.Repeat("5a", 16)
	rdb.HSet(ctx, "doc", "q:"+id, "1") // the writer's mark, ended in 1970
	code, err := singleredis.RunRWAcquire(ctx, lk, "doc", strings.Repeat("c3", 16), id, time.Minute, 30*time.Second)
	if err != nil || code != 0 {
		t.Fatalf("the writer's attempt: code %d, %v; want 0 (held)", code, err)
	}
	until, _ := strconv.ParseInt(rdb.HGet(ctx, "doc", "q:"+id).Val(), 10, 64)
	if left := time.UnixMilli(until).Sub(rdb.Time(ctx).Val()); left <= 0 || left > 30*time.Second {
		t.Errorf("the writer's mark ends %v from now, want its wait's 30s: the attempt must renew it", left)
	}
	if _, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead()); !errors.Is(err, lockswap.ErrHeld) {
		t.Errorf("a reader after the writer's attempt: err = %v, want ErrHeld (a writer waits)", err)
	}
}
