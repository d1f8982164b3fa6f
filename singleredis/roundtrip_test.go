package singleredis_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

// TestContendedAttemptIsOneRequest: an attempt on a key that is held
// (TryAcquire, and each attempt of an Acquire that waits) costs one
// request; one on a key that holds another Redis type is refused with
// ErrInvalid in that request and left as it was (a second request, on
// that error path only, names the type).
func TestContendedAttemptIsOneRequest(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	ctx := context.Background()
	for _, fence := range []bool{false, true} {
		for _, c := range redistest.Clients {
			t.Run(c.Name+"/fence="+strconv.FormatBool(fence), func(t *testing.T) {
				key := "contended1rt:" + c.Name + strconv.FormatBool(fence)
				holder := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
				held, err := holder.Acquire(ctx, key, lockswap.WithTTL(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				cc := &redistest.Counting{Client: c.New(t, srv.Addr())}
				lk, err := singleredis.New(cc, singleredis.Options{Fence: fence})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lk.Close() })

				redistest.CheckContended(t, lk, key, cc.Requests, 1)
				if v := raw.Get(ctx, key).Val(); v != held.Token() {
					t.Errorf("the key holds %q, want the holder's token", v)
				}
				hash := key + ":hash"
				raw.HSet(ctx, hash, "field", "someone else's data")
				// The second request, on that error path only, names the type.
				redistest.CheckNotLock(t, lk, hash, "a Redis hash, not a lock", cc.Requests, 2)
				if v := raw.HGet(ctx, hash, "field").Val(); v != "someone else's data" {
					t.Errorf("the hash under the key was changed to %q", v)
				}
				if n := raw.Exists(ctx, singleredis.FenceKey(hash)).Val(); n != 0 {
					t.Error("the refused attempt created a fence counter")
				}
			})
		}
	}
}

// oldServer is a client of a Redis before 7.0: it rejects SET with both NX
// and GET as a syntax error, as those servers do, and counts the requests.
type oldServer struct {
	redistest.Counting
	refused int
}

func (o *oldServer) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) > 0 && args[0] == "SET" && args[len(args)-1] == "GET" {
		o.refused++
		o.Counting.Do(ctx, "PING") // the request still costs a round trip
		return nil, &redisclient.ReplyError{Msg: "ERR syntax error"}
	}
	return o.Counting.Do(ctx, args...)
}

// TestServerWithoutSetNXGet: on a server that rejects SET NX GET the
// Locker falls back for good to SET NX PX, with the TYPE check on a
// contended first attempt: a held key is ErrHeld, a hash ErrInvalid and
// left untouched, a free key is taken with a plain string and a TTL.
func TestServerWithoutSetNXGet(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { raw.Close() })
	ctx := context.Background()
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			key := "oldserver:" + c.Name
			old := &oldServer{Counting: redistest.Counting{Client: c.New(t, srv.Addr())}}
			rec := logtest.New()
			lk, err := singleredis.New(old, singleredis.Options{Logger: rec.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lk.Close() })
			l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatalf("TryAcquire of a free key: %v", err)
			}
			if v := raw.Get(ctx, key).Val(); v != l.Token() {
				t.Errorf("the key holds %q, want the token", v)
			}
			if pttl := raw.PTTL(ctx, key).Val(); pttl <= 0 || pttl > time.Minute {
				t.Errorf("PTTL %v, want within the TTL", pttl)
			}
			before := old.Requests()
			if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lockswap.ErrHeld) {
				t.Errorf("TryAcquire of a held key: %v, want ErrHeld", err)
			}
			if n := old.Requests() - before; n != 2 {
				t.Errorf("contended first attempt without SET NX GET sent %d requests, want 2 (SET NX PX, TYPE)", n)
			}
			raw.HSet(ctx, key+":hash", "f", "v")
			if _, err := lk.TryAcquire(ctx, key+":hash"); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("TryAcquire of a hash: %v, want ErrInvalid", err)
			}
			if v := raw.HGet(ctx, key+":hash", "f").Val(); v != "v" {
				t.Errorf("the hash was changed to %q", v)
			}
			if old.refused != 1 {
				t.Errorf("SET NX GET was sent %d times, want once (then the fallback sticks)", old.refused)
			}
			// The fallback is logged once, at Info, naming the server.
			got := rec.Find(redisclient.MsgSetGetFallback)
			if len(got) != 1 || len(rec.Records()) != 1 {
				t.Fatalf("records %v, want one %q", rec.Records(), redisclient.MsgSetGetFallback)
			}
			r := got[0]
			if r.Level != slog.LevelInfo || r.String("backend") != "singleredis" || r.String("reason") == "" {
				t.Errorf("record %v: want INFO, backend singleredis, a reason", r)
			}
			if s := r.String("server"); s != old.String() || !strings.Contains(s, srv.Addr()) {
				t.Errorf("server = %q, want %q (the client, naming %s)", s, old.String(), srv.Addr())
			}
		})
	}
}

// TestContendedAttemptServerCommands counts on the server (INFO
// commandstats) what contended attempts cost: one SET each, and no TYPE
// (issue 15, part 3: the TYPE after a failed SET NX PX is gone on Redis
// 7 and later, where SET NX PX GET refuses another type in the same
// request).
func TestContendedAttemptServerCommands(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	if err := raw.Set(ctx, "k", "someone", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	lk := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
	if err := raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const attempts = 5
	for range attempts {
		if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("TryAcquire on a held key: %v", err)
		}
	}
	if _, err := lk.Acquire(ctx, "k", lockswap.WithRetry(lockswap.LimitedRetry(time.Millisecond, attempts))); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("Acquire of %d attempts on a held key: %v", attempts, err)
	}
	stats := raw.Info(ctx, "commandstats").Val()
	calls := func(cmd string) int {
		_, rest, ok := strings.Cut(stats, "cmdstat_"+cmd+":calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		return n
	}
	if n := calls("set"); n != 2*attempts {
		t.Errorf("server ran SET %d times for %d contended attempts, want %d", n, 2*attempts, 2*attempts)
	}
	if n := calls("type"); n != 0 {
		t.Errorf("server ran TYPE %d times for contended attempts, want 0", n)
	}
	t.Logf("server commandstats: %d SET, %d TYPE for %d contended attempts", calls("set"), calls("type"), 2*attempts)
}
