package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/memlock"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

// wait is how long a test waits for a record that is due now.
const wait = 10 * time.Second

// checkRecord fails unless rec is a Warn record of backend with the
// attributes want (by their text), and names the key only with keys.
func checkRecord(t *testing.T, rec logtest.Record, msg, backend string, keys bool, key string, want map[string]string) {
	t.Helper()
	if rec.Message != msg || rec.Level != slog.LevelWarn {
		t.Errorf("record %q at %v, want %q at WARN", rec.Message, rec.Level, msg)
	}
	if got := rec.String("backend"); got != backend {
		t.Errorf("backend = %q, want %q", got, backend)
	}
	if got, has := rec.String("key"), rec.Has("key"); keys && got != key {
		t.Errorf("key = %q with LogKeys, want %q", got, key)
	} else if !keys && has {
		t.Errorf("the record names the key %q without LogKeys", got)
	}
	for k, v := range want {
		if got := rec.String(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// mustHold takes key for a minute through lk, or fails the test.
func mustHold(t *testing.T, lk lockswap.Locker, key string) lockswap.Lock {
	t.Helper()
	l, err := lk.TryAcquire(context.Background(), key, lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// newKit returns the kit's Locker over d, closed at the end of the test.
func newKit(t *testing.T, d driver.Driver[struct{}], cfg driver.Config) *driver.Locker[struct{}] {
	t.Helper()
	lk, err := driver.New(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// TestLogLostExpired: a memlock lock whose deadline passed before its
// Release is reported once, as expired, with how long ago; the key only
// with LogKeys.
func TestLogLostExpired(t *testing.T) {
	for _, keys := range []bool{false, true} {
		t.Run(fmt.Sprintf("LogKeys=%v", keys), func(t *testing.T) {
			rec := logtest.New()
			lk, err := memlock.NewWithOptions(memlock.NewStore(), memlock.Options{Logger: rec.Logger(), LogKeys: keys})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			ctx := context.Background()
			l, err := lk.TryAcquire(ctx, "customer-42", lockswap.WithTTL(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Done():
			case <-time.After(wait):
				t.Fatal("Done did not close after the 20ms TTL")
			}
			if err := l.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrLost) {
				t.Fatalf("Extend after expiry: %v, want ErrLost", err)
			}
			_ = l.Release(ctx)
			lost := rec.Find(driver.MsgLockLost)
			if len(lost) != 1 {
				t.Fatalf("%d %q records for one expired lock (Extend, then Release), want 1: %v", len(lost), driver.MsgLockLost, rec.Records())
			}
			checkRecord(t, lost[0], driver.MsgLockLost, "memlock", keys, "customer-42", map[string]string{"reason": driver.ReasonExpired})
			if d := lost[0].Attrs["overdue"]; d.Kind() != slog.KindDuration || d.Duration() < 0 {
				t.Errorf("overdue = %v, want a duration ≥ 0", d)
			}
			if n := len(rec.Records()); n != 1 {
				t.Errorf("%d records, want only the loss: %v", n, rec.Records())
			}
		})
	}
}

// TestLogQuiet: with a logger, ordinary use and contention write nothing;
// without one, nothing reaches slog's default logger either, even for a
// lost lock.
func TestLogQuiet(t *testing.T) {
	ctx := context.Background()
	rec := logtest.New()
	lk, err := memlock.NewWithOptions(memlock.NewStore(), memlock.Options{Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	l := mustHold(t, lk, "k")
	if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire of a held key: %v, want ErrHeld", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // not passed before the first attempt on a loaded machine
	_, err = lk.Acquire(wctx, "k", lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
	cancel()
	if !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("Acquire of a held key until its context ended: %v, want ErrHeld", err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.Records(); len(got) != 0 {
		t.Errorf("ordinary use and contention logged %v, want nothing", got)
	}

	def := logtest.New()
	old := slog.Default()
	slog.SetDefault(def.Logger())
	defer slog.SetDefault(old)
	silent := memlock.New(memlock.NewStore())
	defer silent.Close()
	l, err = silent.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	_ = l.Release(ctx)
	if got := def.Records(); len(got) != 0 {
		t.Errorf("a Locker without a Logger wrote %v to slog's default logger", got)
	}
}

// TestLogNoAllocs: a logger costs no allocation on the paths that log
// nothing: acquire, release, and contention allocate no more with one
// than without. testing.AllocsPerRun counts the whole process's
// allocations, so another goroutine that allocates meanwhile (the
// runtime's, a timer of an earlier test) adds to a measure on a busy
// machine (CI saw 11 against 10, on either side): the measures with and
// without a logger alternate, each figure is the least of 10, since noise
// only adds, and the check is the promise itself, that the logger adds
// nothing (noise that lands on the side without one is not its cost).
func TestLogNoAllocs(t *testing.T) {
	ctx := context.Background()
	freeNil, heldNil, freeLog, heldLog := math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1)
	for range 10 {
		f, h := allocsOnce(t, ctx, nil)
		freeNil, heldNil = min(freeNil, f), min(heldNil, h)
		f, h = allocsOnce(t, ctx, logtest.New().Logger())
		freeLog, heldLog = min(freeLog, f), min(heldLog, h)
	}
	if freeLog > freeNil || heldLog > heldNil {
		t.Errorf("allocations per acquire+release / contended attempt: %v / %v with a logger, %v / %v without; want no more", freeLog, heldLog, freeNil, heldNil)
	}
	t.Logf("allocations per acquire+release %v, per contended attempt %v", freeNil, heldNil)
}

// allocsOnce measures the allocations of an acquire+release and of a
// contended attempt on a memlock Locker with logger.
func allocsOnce(t *testing.T, ctx context.Context, logger *slog.Logger) (free, held float64) {
	t.Helper()
	lk, err := memlock.NewWithOptions(memlock.NewStore(), memlock.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	free = testing.AllocsPerRun(200, func() {
		l, err := lk.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
	l, err := lk.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	held = testing.AllocsPerRun(200, func() {
		if _, err := lk.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatal(err)
		}
	})
	return free, held
}

// redisLocker returns a singleredis Locker that logs to rec, over a go-redis
// client to addr.
func redisLocker(t *testing.T, addr string, rec *logtest.Recorder) *singleredis.Locker {
	t.Helper()
	lk, err := singleredis.New(redistest.GoRedis(t, addr), singleredis.Options{Logger: rec.Logger(), LogKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// TestLogLostOnServer: a lock deleted on a real redis-server (a flush, an
// eviction, an operator) is reported when its Extend is refused, or when
// its Release finds it gone; once per lock.
func TestLogLostOnServer(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	for _, tc := range []struct {
		name, reason string
		extend       bool
	}{
		{"Extend", driver.ReasonExtendRefused, true},
		{"Release", driver.ReasonNotOurs, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := logtest.New()
			lk := redisLocker(t, srv.Addr(), rec)
			l := mustHold(t, lk, "job-"+tc.name)
			if err := raw.Del(ctx, "job-"+tc.name).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.extend {
				if err := l.Extend(ctx, time.Minute); !errors.Is(err, lockswap.ErrLost) {
					t.Fatalf("Extend of a deleted lock: %v, want ErrLost", err)
				}
			}
			if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Fatalf("Release of a deleted lock: %v, want ErrLost", err)
			}
			lost := rec.Find(driver.MsgLockLost)
			if len(lost) != 1 {
				t.Fatalf("%d %q records, want 1: %v", len(lost), driver.MsgLockLost, rec.Records())
			}
			checkRecord(t, lost[0], driver.MsgLockLost, "singleredis", true, "job-"+tc.name, map[string]string{"reason": tc.reason})
			if lost[0].String("error") == "" {
				t.Errorf("no error attribute: %v", lost[0])
			}
		})
	}
}

// TestLogReleaseFailed: a Release the server refuses (an operator took
// the scripting commands away from the Locker's ACL user while it held a
// lock) is reported at once, with the error and when the lock expires.
func TestLogReleaseFailed(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	if err := raw.Do(ctx, "ACL", "SETUSER", "app", "on", ">app-secret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	app := goredislib.NewClient(&goredislib.Options{Addr: srv.Addr(), Username: "app", Password: "app-secret",
		ContextTimeoutEnabled: true, MaxRetries: -1})
	defer app.Close()
	rec := logtest.New()
	lk, err := singleredis.New(goredis.New(app), singleredis.Options{Logger: rec.Logger(), LogKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	l := mustHold(t, lk, "job")
	if err := raw.Do(ctx, "ACL", "SETUSER", "app", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	err = l.Release(ctx)
	if err == nil || errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Release without the right to run scripts: %v, want an error other than ErrLost", err)
	}
	got := rec.Find(driver.MsgReleaseFailed)
	if len(got) != 1 || len(rec.Records()) != 1 {
		t.Fatalf("records %v, want one %q", rec.Records(), driver.MsgReleaseFailed)
	}
	r := got[0]
	checkRecord(t, r, driver.MsgReleaseFailed, "singleredis", true, "job", nil)
	if !strings.Contains(r.String("error"), "NOPERM") {
		t.Errorf("error = %q, want the server's NOPERM", r.String("error"))
	}
	if strings.Contains(fmt.Sprint(rec.Records()), "app-secret") {
		t.Errorf("a record shows the password: %v", rec.Records())
	}
	if d := r.Attrs["expires_in"]; d.Kind() != slog.KindDuration || d.Duration() <= 0 || d.Duration() > time.Minute {
		t.Errorf("expires_in = %v, want the time left of the 1m TTL", d)
	}
}

// TestLogReleaseGaveUp: a Release whose requests go unanswered (the
// server is cut off) returns at the caller's deadline, and the kit's
// background release gives up after lockswap.CleanupTimeout: reported,
// with the lock left to expire.
func TestLogReleaseGaveUp(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	proxy := testserver.ProxyT(t, srv.Addr())
	rec := logtest.New()
	lk := redisLocker(t, proxy.Addr(), rec)
	ctx := context.Background()
	l := mustHold(t, lk, "job")
	proxy.Blackhole(true)
	defer proxy.Blackhole(false)
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := l.Release(rctx); err == nil {
		t.Fatal("Release through a blackhole succeeded")
	}
	r := rec.Wait(t, driver.MsgReleaseGaveUp, wait)
	checkRecord(t, r, driver.MsgReleaseGaveUp, "singleredis", true, "job", nil)
	if d := r.Attrs["expires_in"]; d.Kind() != slog.KindDuration || d.Duration() <= 0 {
		t.Errorf("expires_in = %v, want the time left of the 1m TTL", d)
	}
	if n := len(rec.Find(driver.MsgReleaseFailed)); n != 0 {
		t.Errorf("%d %q records besides the give-up: one failure, one record", n, driver.MsgReleaseFailed)
	}
}

// TestLogUndoGaveUp: an attempt whose reply never came (the server is cut
// off) may have taken the lock; its background release gets no answer
// either, and is reported with the TTL it leaves the lock for.
func TestLogUndoGaveUp(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	proxy := testserver.ProxyT(t, srv.Addr())
	rec := logtest.New()
	lk := redisLocker(t, proxy.Addr(), rec)
	ctx := context.Background()
	if l, err := lk.TryAcquire(ctx, "warm"); err != nil { // the connection is up
		t.Fatal(err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(true)
	defer proxy.Blackhole(false)
	actx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := lk.TryAcquire(actx, "job", lockswap.WithTTL(time.Minute)); err == nil {
		t.Fatal("TryAcquire through a blackhole succeeded")
	}
	r := rec.Wait(t, driver.MsgUndoGaveUp, wait)
	checkRecord(t, r, driver.MsgUndoGaveUp, "singleredis", true, "job", map[string]string{"ttl": "1m0s"})
}

// scripted is a driver whose steps a test decides: Acquire waits for
// proceed (when set) and runs onAcquire; Release returns release().
type scripted struct {
	proceed   chan struct{}
	onAcquire func(c *driver.Claim[struct{}])
	release   func() error
	claims    chan *driver.Claim[struct{}]
}

func (d *scripted) Acquire(ctx context.Context, c *driver.Claim[struct{}]) (driver.Grant, error) {
	if d.proceed != nil {
		<-d.proceed
	}
	if d.onAcquire != nil {
		d.onAcquire(c)
	}
	if d.claims != nil {
		d.claims <- c
	}
	return driver.Grant{}, nil
}

func (d *scripted) Extend(context.Context, *driver.Claim[struct{}], time.Duration) (driver.Grant, error) {
	return driver.Grant{}, nil
}

func (d *scripted) Release(context.Context, *driver.Claim[struct{}]) error { return d.release() }

// TestLogLose: a loss the driver reports with Claim.Lose (etcdlease's
// watch, its lease) is logged once, whether it comes while the lock is
// held or during the attempt that took it; the Release that follows adds
// nothing.
func TestLogLose(t *testing.T) {
	notOurs := fmt.Errorf("key gone: %w", lockswap.ErrLost)
	for _, during := range []bool{false, true} {
		t.Run(fmt.Sprintf("duringAttempt=%v", during), func(t *testing.T) {
			rec := logtest.New()
			d := &scripted{release: func() error { return notOurs }, claims: make(chan *driver.Claim[struct{}], 1)}
			if during {
				d.onAcquire = func(c *driver.Claim[struct{}]) { c.Lose() }
			}
			lk := newKit(t, d, driver.Config{Name: "watcher", Logger: rec.Logger()})
			ctx := context.Background()
			l := mustHold(t, lk, "k")
			c := <-d.claims
			if !during {
				if n := len(rec.Records()); n != 0 {
					t.Fatalf("%d records before the loss", n)
				}
				c.Lose()
			}
			<-l.Done()
			if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
				t.Fatalf("Release of a lost lock: %v, want ErrLost", err)
			}
			lost := rec.Find(driver.MsgLockLost)
			if len(lost) != 1 || len(rec.Records()) != 1 {
				t.Fatalf("records %v, want one %q", rec.Records(), driver.MsgLockLost)
			}
			checkRecord(t, lost[0], driver.MsgLockLost, "watcher", false, "k", map[string]string{"reason": driver.ReasonDriverLost})
		})
	}
}

// TestLogGiveBackFailed: a lock taken after its caller gave up is given
// back in the background; when that release fails, the lock is left to
// expire and the record says so.
func TestLogGiveBackFailed(t *testing.T) {
	rec := logtest.New()
	refused := fmt.Errorf("server refused: %w", lockswap.ErrUnavailable)
	d := &scripted{proceed: make(chan struct{}), release: func() error { return refused }}
	lk := newKit(t, d, driver.Config{Name: "slow", Logger: rec.Logger(), LogKeys: true})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Minute))
		errc <- err
	}()
	cancel()         // the caller gives up while the attempt is on its way,
	close(d.proceed) // and the attempt takes the lock all the same
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire given up: %v, want context.Canceled", err)
	}
	r := rec.Wait(t, driver.MsgGiveBackFailed, wait)
	checkRecord(t, r, driver.MsgGiveBackFailed, "slow", true, "k", map[string]string{"error": refused.Error()})
	if d := r.Attrs["expires_in"]; d.Kind() != slog.KindDuration || d.Duration() <= 0 {
		t.Errorf("expires_in = %v, want the time left of the 1m TTL", d)
	}
	if n := len(rec.Find(driver.MsgReleaseFailed)); n != 0 {
		t.Errorf("the give-back was also logged as a Release of the caller's: %v", rec.Records())
	}
}
