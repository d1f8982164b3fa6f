package legacysetnx_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/migrate"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// The migration Locker relies on this.
var _ migrate.Locator = (*legacysetnx.Locker)(nil)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newLocker(t *testing.T, newClient redistest.NewClient, addr string, o legacysetnx.Options) *legacysetnx.Locker {
	t.Helper()
	lk, err := legacysetnx.New(newClient(t, addr), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// timestamp is what legacysetnx.Timestamp tells of a lock.
type timestamp struct {
	value  string
	expiry time.Time
}

func (s timestamp) Value() string     { return s.value }
func (s timestamp) Expiry() time.Time { return s.expiry }

func stamp(t *testing.T, l lockswap.Lock) timestamp {
	t.Helper()
	v, exp, ok := legacysetnx.Timestamp(l)
	if !ok {
		t.Fatalf("legacysetnx.Timestamp(%T): not a legacysetnx lock", l)
	}
	return timestamp{v, exp}
}

// TestNaiveVersusGetSet replays the two sequences of the Redis SETNX
// documentation with raw commands: C1 and C2 both DEL an expired lock and
// SETNX again, and both believe they hold it; C4 and C5 both GETSET, and
// only the one whose GETSET returned the expired value holds it. Then it
// runs lockswap clients into the same situation many times and checks that
// exactly one takes each expired lock.
func TestNaiveVersusGetSet(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redistest.GoRedisClient(t, mr.Addr())
	ctx := ctxT(t)
	now := time.Now().Unix()
	expired := strconv.FormatInt(now-5, 10) // C3 crashed holding the lock
	isExpired := func(v string) bool { n, _ := strconv.ParseInt(v, 10, 64); return n < now }
	newExpiry := strconv.FormatInt(now+10+1, 10)

	// The naive sequence.
	rdb.Set(ctx, "lock.foo", expired, 0)
	naiveHolders := 0
	if !rdb.SetNX(ctx, "lock.foo", newExpiry, 0).Val() { // C1: SETNX fails
		c1Saw := rdb.Get(ctx, "lock.foo").Val()
		c2Saw := rdb.Get(ctx, "lock.foo").Val() // C2: SETNX failed too, reads the same
		if isExpired(c1Saw) {
			rdb.Del(ctx, "lock.foo")
			if rdb.SetNX(ctx, "lock.foo", newExpiry, 0).Val() {
				naiveHolders++ // C1
			}
		}
		if isExpired(c2Saw) {
			rdb.Del(ctx, "lock.foo") // deletes C1's fresh lock
			if rdb.SetNX(ctx, "lock.foo", newExpiry, 0).Val() {
				naiveHolders++ // C2
			}
		}
	}
	if naiveHolders != 2 {
		t.Fatalf("naive DEL+SETNX: %d holders, the documentation's race gives 2", naiveHolders)
	}

	// The GETSET sequence.
	rdb.Set(ctx, "lock.foo", expired, 0)
	getsetHolders := 0
	c4Saw := rdb.Get(ctx, "lock.foo").Val()
	c5Saw := rdb.Get(ctx, "lock.foo").Val()
	if isExpired(c4Saw) {
		if old := rdb.GetSet(ctx, "lock.foo", newExpiry).Val(); isExpired(old) {
			getsetHolders++ // C4
		}
	}
	if isExpired(c5Saw) {
		if old := rdb.GetSet(ctx, "lock.foo", newExpiry).Val(); isExpired(old) {
			getsetHolders++ // C5
		}
	}
	if getsetHolders != 1 {
		t.Fatalf("GETSET takeover: %d holders, want exactly 1", getsetHolders)
	}

	// lockswap: several Lockers race for an expired lock, round after round.
	for _, c := range redistest.Clients {
		lockers := make([]*legacysetnx.Locker, 4)
		for i := range lockers {
			lockers[i] = newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."})
		}
		for round := 0; round < 20; round++ {
			rdb.Set(ctx, "lock.foo", expired, 0)
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for _, lk := range lockers {
				for g := 0; g < 3; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, err := lk.TryAcquire(ctx, "foo", lockswap.WithTTL(10*time.Second))
						if err == nil {
							mu.Lock()
							won++
							mu.Unlock()
						} else if !errors.Is(err, lockswap.ErrHeld) {
							t.Errorf("TryAcquire: %v", err)
						}
					}()
				}
			}
			wg.Wait()
			if won != 1 {
				t.Fatalf("%s round %d: %d of 12 racing clients took the same expired lock, want exactly 1", c.Name, round, won)
			}
		}
	}
}

// TestValueFormat checks what lockswap writes: the documented "Unix time +
// TTL + 1" in seconds by default, milliseconds as an option, under the
// prefixed key, with no Redis expiry unless asked.
func TestValueFormat(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	fixed := time.Unix(1_800_000_000, 400_000_000)
	clock := func() time.Time { return fixed }
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr.FlushAll()
			s := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock.", Clock: clock})
			l, err := s.TryAcquire(ctx, "foo", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := mr.Get("lock.foo"); got != "1800000011" {
				t.Errorf("seconds: lock.foo = %q, want 1800000011 (now 1800000000 + ttl 10 + 1)", got)
			}
			if got := stamp(t, l).Value(); got != "1800000011" {
				t.Errorf("Value() = %q", got)
			}
			if !stamp(t, l).Expiry().Equal(time.Unix(1800000011, 0)) {
				t.Errorf("Expiry() = %v", stamp(t, l).Expiry())
			}
			if mr.TTL("lock.foo") != 0 {
				t.Errorf("a Redis expiry was set without SetRedisExpiry: %v", mr.TTL("lock.foo"))
			}
			if len(l.Token()) != 32 {
				t.Errorf("Token() = %q, want 128 random bits in hex", l.Token())
			}
			// A TTL that is not a whole number of units rounds up.
			l2, err := s.TryAcquire(ctx, "bar", lockswap.WithTTL(1500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := mr.Get("lock.bar"); got != "1800000003" {
				t.Errorf("seconds, ttl 1.5s: lock.bar = %q, want 1800000003 (now + 2 + 1)", got)
			}
			// Less than one unit is refused, not rounded (TestTTLRange).
			if _, err := s.TryAcquire(ctx, "baz", lockswap.WithTTL(300*time.Millisecond)); !errors.Is(err, lockswap.ErrInvalid) || mr.Exists("lock.baz") {
				t.Errorf("seconds, ttl 300ms: err = %v, key written %v; want ErrInvalid and nothing written", err, mr.Exists("lock.baz"))
			}
			l.Release(ctx)
			l2.Release(ctx)

			ms := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, Clock: clock, SetRedisExpiry: true})
			l, err = ms.TryAcquire(ctx, "foo", lockswap.WithTTL(1500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := mr.Get("foo"); got != "1800000001901" {
				t.Errorf("milliseconds: foo = %q, want 1800000001901 (now 1800000000400 + 1500 + 1)", got)
			}
			if ttl := mr.TTL("foo"); ttl != 1501*time.Millisecond+legacysetnx.RedisExpiryMargin {
				t.Errorf("SetRedisExpiry: Redis TTL %v, want the validity 1501ms + margin %v", ttl, legacysetnx.RedisExpiryMargin)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if mr.Exists("foo") {
				t.Error("Release left the key")
			}
		})
	}
}

// TestOldClientLockHonoured: a lock written by an old client (a bare
// timestamp, no Redis TTL) is held while the timestamp is in the future and
// untouched; once it is past, lockswap takes it over.
func TestOldClientLockHonoured(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	clock := &fakeClock{}
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			lk := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock.", Clock: clock.Now, SetRedisExpiry: true})
			until := clock.Now().Unix() + 5 // read once: the clock may pass a second boundary
			old := strconv.FormatInt(until, 10)
			mr.Set("lock.job", old)
			_, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
			if !errors.Is(err, lockswap.ErrHeld) || !strings.Contains(err.Error(), "job") {
				t.Fatalf("old client's live lock: err = %v, want ErrHeld naming the key", err)
			}
			if v, _ := mr.Get("lock.job"); v != old || mr.TTL("lock.job") != 0 {
				t.Fatalf("old client's live lock changed: %q ttl %v", v, mr.TTL("lock.job"))
			}
			exp, live, err := lk.Peek(ctx, "job")
			if err != nil || !live || exp.Unix() != until {
				t.Fatalf("Peek = %v, %v, %v; want live until the old timestamp", exp, live, err)
			}
			clock.Advance(7 * time.Second) // the old client crashed; its timestamp passes
			if _, live, err := lk.Peek(ctx, "job"); err != nil || live {
				t.Fatalf("Peek after the timestamp passed: live = %v, %v", live, err)
			}
			l, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(time.Second))
			if err != nil {
				t.Fatalf("takeover of an expired old lock: %v", err)
			}
			if v, _ := mr.Get("lock.job"); v == old || v != stamp(t, l).Value() {
				t.Errorf("after takeover lock.job = %q, want our timestamp %q", v, stamp(t, l).Value())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if _, live, err := lk.Peek(ctx, "job"); live || err != nil {
				t.Errorf("Peek of a released lock = %v, %v", live, err)
			}
		})
	}
}

// TestNotATimestamp: someone else's data under the key, or a timestamp in
// the other unit, is a clear ErrInvalid and is left untouched.
func TestNotATimestamp(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			s := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."})
			ms := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds})
			secNow := strconv.FormatInt(time.Now().Unix()+60, 10)
			msNow := strconv.FormatInt(time.Now().UnixMilli()+60_000, 10)
			for _, tc := range []struct {
				lk         *legacysetnx.Locker
				value, msg string
			}{
				{s, "hello world", "not a lock timestamp"},
				{s, "12.5.1", "not a lock timestamp"},
				{s, "-17", "not a lock timestamp"},
				{s, "42", "not a Unix timestamp in seconds"},
				{s, msNow, "not a Unix timestamp in seconds"},
				{ms, secNow, "not a Unix timestamp in milliseconds"},
			} {
				mr.Set("lock.data", tc.value)
				_, err := tc.lk.TryAcquire(ctx, "data", lockswap.WithTTL(time.Second))
				if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "lock.data") {
					t.Errorf("value %q: err = %v, want ErrInvalid saying %q and naming the key", tc.value, err, tc.msg)
				}
				if _, _, err := tc.lk.Peek(ctx, "data"); !errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("Peek of %q: err = %v, want ErrInvalid", tc.value, err)
				}
				if v, _ := mr.Get("lock.data"); v != tc.value {
					t.Errorf("value %q was changed to %q", tc.value, v)
				}
			}
			mr.Del("lock.data")
			mr.HSet("lock.data", "f", "v")
			if _, err := s.TryAcquire(ctx, "data", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("hash under the key: err = %v, want ErrInvalid", err)
			}
			if _, _, err := s.Peek(ctx, "data"); !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("Peek of a hash: err = %v, want ErrInvalid", err)
			}
			if mr.HGet("lock.data", "f") != "v" {
				t.Error("the hash was changed")
			}
			mr.Del("lock.data")
			// Decimal timestamps (some old clients write fractional seconds)
			// are timestamps.
			mr.Set("lock.data", secNow+".25")
			if _, err := s.TryAcquire(ctx, "data", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Errorf("fractional live timestamp: err = %v, want ErrHeld", err)
			}
			exp, live, err := s.Peek(ctx, "data")
			if err != nil || !live || exp.Nanosecond() != 250_000_000 {
				t.Errorf("Peek of a fractional timestamp = %v, %v, %v", exp, live, err)
			}
			mr.Del("lock.data")
		})
	}
}

// TestServerTime: with ServerTime the expiry checks and the written
// timestamps use the Redis server's TIME, whatever the client clocks say.
func TestServerTime(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	serverNow := time.Unix(1_800_000_000, 0)
	mr.SetTime(serverNow)
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr.FlushAll()
			mr.SetTime(serverNow)
			behind := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, ServerTime: true, Clock: func() time.Time { return time.Unix(1, 0) }})
			ahead := newLocker(t, c.New, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, ServerTime: true, Clock: func() time.Time { return serverNow.Add(time.Hour) }})
			l, err := behind.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := mr.Get("k"); v != "1800000011" {
				t.Fatalf("stored %q, want the server's time + 10 + 1 = 1800000011 (a plain timestamp old clients read)", v)
			}
			if _, err := ahead.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
				t.Fatalf("a client whose clock runs an hour ahead: %v, want ErrHeld: ServerTime must not use it", err)
			}
			if _, live, err := ahead.Peek(ctx, "k"); err != nil || !live {
				t.Errorf("Peek with ServerTime = %v, %v; want live by the server's clock", live, err)
			}
			mr.SetTime(serverNow.Add(5 * time.Second))
			if err := l.Extend(ctx, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if v, _ := mr.Get("k"); v != "1800000016" {
				t.Errorf("after Extend stored %q, want 1800000016", v)
			}
			mr.SetTime(serverNow.Add(17 * time.Second))
			lb, err := ahead.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatalf("takeover once the server's clock passed the timestamp: %v", err)
			}
			if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Errorf("stale Release: %v", err)
			}
			lb.Release(ctx)
		})
	}
}

// TestDeadlineHonest: Deadline is never later than the stored timestamp
// (when other clients consider the lock expired) nor than TTL after the
// call, and Extend moves the timestamp and the deadline.
func TestDeadlineHonest(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := ctxT(t)
	for _, unit := range []legacysetnx.Unit{legacysetnx.Seconds, legacysetnx.Milliseconds} {
		clock := &fakeClock{}
		clock.Advance(37 * time.Minute) // the wall clock differs from the monotonic one
		lk := newLocker(t, redistest.GoRedis, mr.Addr(), legacysetnx.Options{Unit: unit, Clock: clock.Now})
		for _, ttl := range []time.Duration{100 * time.Millisecond, 1500 * time.Millisecond, 10 * time.Second} {
			if min, _ := lk.TTLRange(); ttl < min {
				continue // refused (TestTTLRange)
			}
			start := time.Now()
			l, err := lk.TryAcquire(ctx, "d", lockswap.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			end := time.Now()
			tl := stamp(t, l)
			// Deadline on the client's wall clock: shift by the fake offset.
			wall := l.Deadline().Add(37 * time.Minute)
			if !wall.Before(tl.Expiry()) {
				t.Errorf("unit %v ttl %v: Deadline %v (wall) is not before the stored expiry %v", unit, ttl, wall, tl.Expiry())
			}
			if l.Deadline().After(end.Add(ttl)) || !l.Deadline().After(start) {
				t.Errorf("unit %v ttl %v: Deadline %v outside (start, end+ttl]", unit, ttl, l.Deadline())
			}
			before := tl.Value()
			clock.Advance(ttl / 2)
			if err := l.Extend(ctx, 2*ttl); err != nil {
				t.Fatal(err)
			}
			after := stamp(t, l).Value()
			if after == before && unit == legacysetnx.Milliseconds {
				t.Errorf("Extend did not change the stored timestamp %s", before)
			}
			if v, _ := mr.Get("d"); v != after {
				t.Errorf("stored %q, lock says %q", v, after)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestNewAndParseUnit(t *testing.T) {
	mr := miniredis.RunT(t)
	if _, err := legacysetnx.New(nil, legacysetnx.Options{Unit: legacysetnx.Seconds}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("New(nil) = %v, want ErrInvalid", err)
	}
	var nilClient *redis.Client
	if _, err := legacysetnx.New(goredis.New(nilClient), legacysetnx.Options{Unit: legacysetnx.Seconds}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("New(nil go-redis) = %v, want ErrInvalid", err)
	}
	if _, err := legacysetnx.New(redistest.GoRedis(t, mr.Addr()), legacysetnx.Options{Unit: 7}); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "unit") {
		t.Errorf("New with Unit 7 = %v, want ErrInvalid naming the unit", err)
	}
	for in, want := range map[string]legacysetnx.Unit{"s": legacysetnx.Seconds, "sec": legacysetnx.Seconds, "seconds": legacysetnx.Seconds, " Second ": legacysetnx.Seconds,
		"ms": legacysetnx.Milliseconds, "MS": legacysetnx.Milliseconds, "millis": legacysetnx.Milliseconds, "milliseconds": legacysetnx.Milliseconds} {
		if got, err := legacysetnx.ParseUnit(in); err != nil || got != want {
			t.Errorf("ParseUnit(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := legacysetnx.ParseUnit("minutes"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "minutes") {
		t.Errorf("ParseUnit(minutes) = %v, want ErrInvalid naming the input", err)
	}
	if legacysetnx.Seconds.String() != "s" || legacysetnx.Milliseconds.String() != "ms" {
		t.Error("Unit.String must give the URL spelling")
	}
	lk := newLocker(t, redistest.GoRedis, mr.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."})
	if store, key := lk.Locate("foo"); key != "lock.foo" || !strings.Contains(store, mr.Addr()) {
		t.Errorf("Locate(foo) = %q, %q", store, key)
	}
	if _, _, err := lk.Peek(context.Background(), ""); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Peek of an empty key: %v", err)
	}
	if !strings.HasPrefix(lk.String(), "legacysetnx(") {
		t.Errorf("String() = %q", lk.String())
	}
}

func TestGuaranteesDeclared(t *testing.T) {
	g := legacysetnx.Guarantees()
	want := lockswap.Guarantees{Backend: "legacysetnx", Clock: lockswap.ClockSynchronized, Nodes: 1,
		StaleReleaseSafe: true, Wait: lockswap.WaitPoll}
	if g.Backend != want.Backend || g.Fencing || g.SurvivesHolderPause || g.SurvivesFailover || g.SurvivesRestart ||
		g.Clock != want.Clock || g.Nodes != 1 || g.Tolerates != 0 || !g.StaleReleaseSafe || g.Wait != lockswap.WaitPoll {
		t.Errorf("Guarantees() = %+v", g)
	}
	if err := g.Require(lockswap.PropClockIndependent); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("require=clock-independent must be refused: %v", err)
	}
	notes := strings.Join(g.Notes, "\n")
	for _, w := range []string{"ServerTime", "same timestamp", "clock runs ahead", "GETSET"} {
		if !strings.Contains(notes, w) {
			t.Errorf("Notes lack %q:\n%s", w, notes)
		}
	}
}

// TestCancelMidRequest: an acquisition cancelled while its script is on
// the way to Redis leaves no timestamp behind once its TTL has passed
// (redistest.CancelMidRequestWithoutUndo): when its reply comes in time
// the kit gives the lock back, and when it comes later than
// DeadlineGrace after the cancellation the timestamp stays until it
// passes (Guarantees: no owner to compare, so no undo). A CI run on a
// loaded machine had the later reply on rueidis, whose pipeline lets a
// cancelled request run.
func TestCancelMidRequest(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			redistest.CancelMidRequestWithoutUndo(t, []string{srv.Addr()}, 2*time.Second, time.Second, func(t *testing.T, addrs []string) lockswap.Locker {
				return newLocker(t, c.New, addrs[0], legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: c.Name + ":"})
			})
		})
	}
}
