// Package singleredis is a lockswap backend on one Redis: acquire is one
// SET key token NX PX ttl GET (the GET makes Redis refuse, in the same
// request, a key of another type; Redis before 7.0 gets SET NX PX), release
// one EVALSHA compare-and-delete, extend one EVALSHA compare-and-pexpire.
//
// The stored value is the plain random token, so any other client that
// follows the standard single-instance scheme (SET NX PX with a random
// value, compare-and-delete on release) on the same key excludes lockswap
// and is excluded by it.
//
// With Options.Fence, acquire is one EVALSHA that does the SET NX PX and
// advances a fence counter in the same hash slot (so it works on Redis
// Cluster too) to max(counter + 1, the server's clock in microseconds);
// Lock.Fence returns the new value. The clock keeps fences increasing when
// a restart without persistence loses the counter (see Guarantees).
//
// With Options.FairWait, Acquire waits in a queue in Redis shared by every
// Locker on the key (in any process) instead of polling: a release hands
// the key to the first waiter in the same script and wakes it over Pub/Sub
// (see fair.go and docs/singleredis.md, "Fair wait across processes");
// permits wait the same way, a release handing its slot over
// (fair_permits.go).
//
// One Redis is one point of failure: a restart without persistence or a
// failover to an asynchronous replica loses the lock (see Guarantees).
package singleredis

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/redisclient"
)

// Options configure a Locker. The zero value is usable.
type Options struct {
	// Prefix is prepended to every key in Redis ("app:" makes lock "x" the
	// key "app:x").
	Prefix string
	// Fence enables fencing: a counter per key, advanced by every
	// acquisition in the same script as the SET to max(counter + 1, the
	// server's clock in microseconds), always below 2^53.
	Fence bool
	// Retry is Acquire's default retry policy; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// TTL is the default TTL of Acquire and TryAcquire (lockswap.WithTTL
	// overrides it); zero means lockswap.DefaultTTL.
	TTL time.Duration
	// Closer, when set, is closed by Locker.Close (for a client the Locker
	// owns, such as one opened from a URL).
	Closer io.Closer
	// Logger, when set, receives the events a person must see (a lock
	// lost, a release that failed; see docs/observability.md); nil logs
	// nothing.
	Logger *slog.Logger
	// LogKeys adds lock keys to the records (off: keys may be sensitive).
	LogKeys bool
	// FairWait makes Acquire wait in a queue in Redis, shared by every
	// Locker with FairWait on the key, instead of polling: a release hands
	// the key to the first waiter in the same request and wakes only it
	// (Redis Pub/Sub); waiters send one request per two TTLs while they
	// wait. It needs a client that implements redisclient.Subscriber (the
	// go-redis, redigo and rueidis adapters do). Permits
	// (lockswap.WithPermits) wait the same way, a release handing its
	// slot to the first waiter; read-write holds still poll. See
	// docs/singleredis.md, "Fair wait across processes".
	FairWait bool
}

// DefaultRetry is the retry policy Acquire uses when none is given: a random
// delay of 5 to 25 ms between attempts, until the context ends. A constant
// jittered interval keeps waiters fair (exponential backoff favours
// newcomers).
var DefaultRetry = lockswap.JitterRetry(5*time.Millisecond, 25*time.Millisecond)

// FenceSuffix is appended to the fence counter's key.
const FenceSuffix = ":fence"

// The messages a fenced Locker with Options.Logger writes at New about
// its server's settings (docs/observability.md), at level Warn.
const (
	// MsgDurabilityRisk: the server's settings let a crash bring a fence
	// counter back older (appendfsync other than always, RDB snapshots
	// without the append-only file: fences repeat) or let memory pressure
	// evict it (an allkeys-* maxmemory-policy).
	MsgDurabilityRisk = "server settings can lose fence counters"
	// MsgDurabilityUnknown: the server's settings could not be read
	// (CONFIG GET denied or renamed, or no answer).
	MsgDurabilityUnknown = "server settings unknown"
)

var (
	releaseScript = redisscript.CompareAndDelete
	extendScript  = redisscript.CompareAndPExpire
	// The fenced acquire: SET NX PX plus the next fence (see nextFenceLua),
	// stored in the counter. Everything is checked before anything is
	// written (Redis does not roll back a script that fails halfway): the
	// reply is the new fence (> 0), 0 when the key is held, or one of the
	// negative fence* codes, with nothing written.
	fencedAcquire = redisclient.NewScript(redisscript.FenceCounterLua + nextFenceLua + fencedAcquireLua)
	// The hand-over scripts release our lock and make the first local
	// waiter's attempt in one request: exactly the release script followed
	// by the acquire (SET NX PX, or the fenced acquire script) with the
	// waiter's token, run atomically. They return {released, acquired}
	// (fenced: acquired is the new fence, 0 when the key is held, or a
	// negative fence* code when the counter is unusable: then nothing but
	// our release, already done and still reported, was written).
	handOver       = redisscript.HandOver
	fencedHandOver = redisclient.NewScript(redisscript.FenceCounterLua + nextFenceLua + fencedHandOverLua)

	//go:embed fenced_acquire.lua
	fencedAcquireLua string
	//go:embed fenced_hand_over.lua
	fencedHandOverLua string
)

// fenceLimit bounds the fences: every fence is below 2^53, so that Lua's
// numbers, float64 and JSON carry it exactly.
const fenceLimit = redisscript.FenceLimit

// The replies of the fenced scripts below 1 (a fence is at least 1).
const (
	fenceHeld       = 0                           // the lock key is held: nothing was written
	fenceNotInteger = redisscript.FenceNotInteger // the counter holds a string that is not a non-negative integer
	fenceTooLarge   = redisscript.FenceTooLarge   // the counter is so high that the next fence would reach 2^53
	fenceWrongType  = redisscript.FenceWrongType  // the counter holds another Redis type
	fenceKeyNotLock = -4                          // the lock key holds another Redis type (fenced acquire only)
)

// nextFenceLua follows redisscript.FenceCounterLua (the counter's checks,
// shared with redlock, and the switch to effects replication, so that
// writes may follow TIME) at the start of both fenced scripts.
//
// next_fence(k) returns the next fence for the counter k, writing
// nothing: max(counter + 1, the server clock in microseconds since the
// epoch). The counter keeps fences increasing while the data lives; the
// clock keeps them increasing when the counter is lost (a restart without
// persistence), as long as the server's clock is past the last fence
// issued. Below 1 it returns a fence* code: the counter is another type
// (checked with TYPE, so that no error is raised halfway through the
// hand-over), not a non-negative integer, or too high (a number of more
// digits than Lua's integer conversion takes is too high as well).
//
//go:embed next_fence.lua
var nextFenceLua string

// parseFence reads a fenced acquire's reply: held (a fence), or not
// (0), or an ErrInvalid error for a counter that cannot give a fence.
func parseFence(v any, counterKey string) (ok bool, fence uint64, err error) {
	n, isInt := v.(int64)
	switch {
	case !isInt:
		return false, 0, fmt.Errorf("unexpected reply %v from the fenced acquire script (fence counter %s): %w",
			v, lockstate.QuoteKey(counterKey), lockswap.ErrInvalid)
	case n == fenceHeld:
		return false, 0, nil
	case n < 0 || n >= fenceLimit:
		return false, 0, fenceError(counterKey, n)
	}
	return true, uint64(n), nil
}

// fenceError is the error of an attempt whose fenced script answered code
// (< 0): the counter cannot give a fence, and the script wrote nothing.
// It matches lockswap.ErrInvalid: no retry will change the counter.
func fenceError(counterKey string, code int64) error {
	what := redisscript.FenceCounterProblem(code)
	return fmt.Errorf("the fence counter %s %s; the lock key and the counter were left untouched: %w",
		lockstate.QuoteKey(counterKey), what, lockswap.ErrInvalid)
}

// Locker is the single-Redis lockswap.Locker. The kit (package driver)
// does the edges of every call; this package is the protocol.
type Locker struct {
	*driver.Locker[ref]
	p *proto
}

var _ lockswap.Locker = (*Locker)(nil)

// New returns a Locker over c. A nil client is rejected with an error
// matching lockswap.ErrInvalid, and so is a TTL outside
// [lockswap.MinTTL, lockswap.MaxTTL].
func New(c redisclient.Client, opts Options) (*Locker, error) {
	if redisclient.IsNil(c) {
		return nil, fmt.Errorf("singleredis: nil redis client: %w", lockswap.ErrInvalid)
	}
	if opts.Retry == nil {
		opts.Retry = DefaultRetry
	}
	p := &proto{c: c, prefix: opts.Prefix, fence: opts.Fence}
	p.sg, _ = c.(redisclient.SetGetter)
	if opts.Logger != nil {
		p.log = opts.Logger.With(slog.String("backend", "singleredis"))
	}
	var (
		d      driver.Driver[ref] = p
		closer                    = opts.Closer
		g                         = Guarantees(opts.Fence)
	)
	if opts.FairWait {
		sub, ok := c.(redisclient.Subscriber)
		if !ok {
			return nil, fmt.Errorf("singleredis: FairWait needs a client that can subscribe (redisclient.Subscriber), and %s cannot: %w", c, lockswap.ErrInvalid)
		}
		f := newFair(p, sub)
		d, closer, g.Wait = f, closeBoth(f, opts.Closer), lockswap.WaitQueue
	}
	// TTLs: Redis keeps expiries to the millisecond, and at lockswap.MinTTL
	// the clock drift allowance still leaves most of the TTL as validity.
	kit, err := driver.New[ref](d, driver.Config{
		Name:        "singleredis",
		Guarantees:  g,
		TTL:         opts.TTL,
		Retry:       opts.Retry,
		CheckKey:    redisclient.CheckKey(opts.Prefix),
		Fence:       opts.Fence,
		Queue:       true,
		Permits:     true,
		WaitPermits: opts.FairWait,
		ReadWrite:   true,
		Uncertain:   redisclient.Uncertain,
		Undo:        redisclient.MaybeApplied,
		Closer:      closer,
		Logger:      opts.Logger,
		LogKeys:     opts.LogKeys,
		Background:  &p.bg,
	})
	if err != nil {
		p.bg.Close()
		return nil, err
	}
	if opts.Fence && p.log != nil {
		// A fence counter that a crash brings back older repeats fences,
		// one that memory pressure evicts is seeded again from the clock:
		// warn about the settings that allow either (redisclient.Durability).
		p.bg.Go(func(ctx context.Context) {
			redisclient.WarnDurability(ctx, p.log, []redisclient.Client{c}, MsgDurabilityRisk, MsgDurabilityUnknown)
		})
	}
	redisclient.LogClientCost(p.log, c)
	return &Locker{Locker: kit, p: p}, nil
}

// CheckDurability implements registry.DurabilityChecker (require=durable):
// it reads the server's settings, bounded by ctx, and returns an error
// matching lockswap.ErrInvalid that names the settings that let a crash
// bring a fence counter back older or let memory pressure evict it, and
// what to set instead; nil when there are none, or when the settings
// cannot be read (CONFIG GET denied, no answer). A Locker without Fence
// keeps nothing the check is about: ErrInvalid.
func (lk *Locker) CheckDurability(ctx context.Context) error {
	if !lk.p.fence {
		return fmt.Errorf("singleredis: require=durable applies to fence=true, and this Locker has none: %w", lockswap.ErrInvalid)
	}
	if err := redisclient.RequireDurable(redisclient.CheckDurability(ctx, []redisclient.Client{lk.p.c})); err != nil {
		return fmt.Errorf("singleredis: %w", err)
	}
	return nil
}

// String names the backend and client, without credentials.
func (lk *Locker) String() string { return "singleredis(" + lk.p.c.String() + ")" }

// Locate returns the Redis server and key under which the lock named key is
// stored (see migrate.Locator).
func (lk *Locker) Locate(key string) (store, storedKey string) {
	return redisclient.Store(lk.p.c), lk.p.prefix + key
}

// Guarantees returns the single-Redis backend's guarantees, with or without
// fencing.
func Guarantees(fence bool) lockswap.Guarantees {
	g := lockswap.Guarantees{
		Backend:          "singleredis",
		Fencing:          fence,
		Clock:            lockswap.ClockNone,
		Nodes:            1,
		Tolerates:        0,
		StaleReleaseSafe: true,
		Wait:             lockswap.WaitPoll,
		DeadlineOverrun:  lockswap.DeadlineGrace,
		Permits:          true,
		ReadWrite:        true,
		Notes: []string{
			"a restart without persistence or a failover to an async replica loses the lock",
		},
	}
	if fence {
		g.Notes = append(g.Notes,
			"a fence is max(counter + 1, the server's clock in microseconds), always below 2^53: fences keep increasing across a restart without persistence unless the server's clock is set back across it by more than the downtime",
			"after a failover fences keep increasing unless the promoted replica's clock is behind the old primary's by more than the time from the old primary's last fence to the new one's first: a replica that lags in data only repeats no fence",
			"while two primaries take writes at once (split brain) each gives fences from its own clock: they interleave and can coincide",
			"a fence counter key expires 1 h after the last fence it gave (FenceCounterTTL): fences keep increasing after that unless the server's clock was set back by more than that meanwhile",
		)
	}
	return g
}

// FenceCounterTTL is how long a fence counter key lives after the last
// fence it gave (each fence sets it again), so that fenced locks on
// ever new names leave no key forever. Its loss when it expires is the
// loss of a restart without persistence, with no downtime: the next fence
// is the server's clock in microseconds, above every fence given, as long
// as the server's clock has not been set back by more than this since the
// last one (docs/singleredis.md, "Fencing").
const FenceCounterTTL = time.Hour

// fenceCounterTTL is FenceCounterTTL, shorter in tests
// (SetFenceCounterTTL).
var fenceCounterTTL = FenceCounterTTL

// FenceKey returns the key of the fence counter for the Redis key k, in the
// same Redis Cluster hash slot as k: "{k}:fence", or "k:fence" when k has a
// hash tag of its own (see redisclient.SlotKey). A key that contains "}"
// without a valid hash tag cannot share a slot with any other key; on Redis
// Cluster, fenced locks on such keys fail at once with Redis's CROSSSLOT
// error (reported as ErrInvalid, not retried).
func FenceKey(k string) string { return redisclient.SlotKey(k, FenceSuffix) }

// proto is the single-Redis protocol: the driver.Driver and
// driver.HandOver of the kit.
type proto struct {
	c      redisclient.Client
	prefix string
	fence  bool
	// sg is c when it runs SET NX PX GET from typed arguments (no
	// boxing); nil otherwise.
	sg redisclient.SetGetter
	// plainSet: the server rejected SET NX GET (Redis before 7.0).
	plainSet atomic.Bool
	// log is Options.Logger with the backend attribute; nil: silent.
	log *slog.Logger
	// bg is the kit's background group (driver.Config.Background): the
	// durability check of a fenced Locker runs there.
	bg driver.Background
	// ttlArg is the last TTL of SET NX PX GET as its boxed argument, so
	// that locks of the same TTL share one.
	ttlArg atomic.Pointer[ttlArg]
}

// ttlArg is a TTL in milliseconds and its argument (redisclient.TTLArg).
type ttlArg struct {
	ms  int64
	arg any
}

// msArg returns redisclient.TTLArg(ttl), boxed once per TTL in a row.
func (p *proto) msArg(ttl time.Duration) any {
	ms := max(ttl.Milliseconds(), 1)
	if t := p.ttlArg.Load(); t != nil && t.ms == ms {
		return t.arg
	}
	t := &ttlArg{ms, redisclient.TTLArg(ttl)}
	p.ttlArg.Store(t)
	return t.arg
}

// ref is a lock's Data: its Redis key and token as the scripts take them,
// kept to spare an allocation per call.
type ref struct {
	keys     [1]string // KEYS of the scripts
	tokenArg [1]any    // ARGV[1] of the release script
	setGet   redisclient.SetGetArgs
}

func (r *ref) set(k, token string) { r.keys[0], r.tokenArg[0] = k, token }

// Acquire makes one attempt in one request: SET NX PX GET, or the fenced
// acquire script. A key that holds another Redis type is refused in the
// same request (WRONGTYPE) and reported as such. On a Redis before 7.0,
// which rejects NX with GET, it falls back for good to SET NX PX (logged
// once, redisclient.MsgSetGetFallback) and, on the first attempt of a call
// that finds the key taken, one TYPE request.
func (p *proto) Acquire(ctx context.Context, c *driver.Claim[ref]) (driver.Grant, error) {
	switch {
	case c.Permits > 0:
		return p.acquirePermit(ctx, c)
	case c.RW != lockswap.NotRW:
		return p.acquireRW(ctx, c)
	}
	k := p.prefix + c.Key
	c.Data.set(k, c.Token)
	var (
		ok  bool
		g   driver.Grant
		err error
	)
	switch {
	case p.fence:
		var v any
		if v, err = p.c.Run(ctx, fencedAcquire, []string{k, FenceKey(k)}, c.Token, c.TTL.Milliseconds(), fenceCounterTTL.Milliseconds()); err == nil {
			if n, _ := v.(int64); n == fenceKeyNotLock {
				return g, p.notLock(ctx, k)
			}
			if ok, g.Fence, err = parseFence(v, FenceKey(k)); err != nil {
				return g, err
			}
		}
	case !p.plainSet.Load():
		if p.sg != nil {
			ok, err = p.sg.SetNXPXGet(ctx, k, c.Token, c.TTL)
		} else {
			c.Data.setGet.Fill(k, c.Data.tokenArg[0], p.msArg(c.TTL))
			ok, err = c.Data.setGet.Run(ctx, p.c)
		}
		if !redisclient.IsSyntaxError(err) {
			break
		}
		// Nothing ran: the server predates SET NX GET.
		if p.plainSet.CompareAndSwap(false, true) {
			redisclient.LogSetGetFallback(p.log, p.c)
		}
		fallthrough
	default:
		ok, err = p.c.SetNXPX(ctx, k, c.Token, c.TTL)
		if err == nil && !ok && c.First {
			if err := p.checkStringKey(ctx, k); err != nil {
				return g, err
			}
		}
	}
	if err != nil {
		if redisclient.IsWrongType(err) {
			if p.fence {
				return g, fmt.Errorf("the fence counter %s holds another Redis type: %w", lockstate.QuoteKey(FenceKey(k)), lockswap.ErrInvalid)
			}
			return g, p.notLock(ctx, k)
		}
		return g, redisclient.Classify(p.c, err)
	}
	if !ok {
		return g, lockswap.ErrHeld
	}
	return g, nil
}

// checkStringKey returns an ErrInvalid error when k holds a non-string
// value: that is not a lock, and no amount of waiting will free it. Only
// a server without SET NX GET needs it.
func (p *proto) checkStringKey(ctx context.Context, k string) error {
	v, err := p.c.Do(ctx, "TYPE", k)
	if err != nil {
		// The SET was answered (the key is held); only the explanation
		// failed. Contention it is: an ErrUnavailable here would make the
		// kit undo a SET that certainly did not happen.
		return nil
	}
	if typ, _ := v.(string); typ != "string" && typ != "none" {
		return notLockType(k, typ)
	}
	return nil
}

// notLock is the error of an attempt refused because key k holds another
// Redis type than a string: that is not a lock, and no amount of waiting
// will free it. On this error path only, it asks the server for the type
// to name it.
func (p *proto) notLock(ctx context.Context, k string) error {
	v, _ := p.c.Do(ctx, "TYPE", k)
	typ, _ := v.(string)
	return notLockType(k, typ)
}

// notLockType is notLock's error for a key of Redis type typ ("" when
// unknown).
func notLockType(k, typ string) error {
	what := "another Redis type"
	if typ != "" && typ != "string" && typ != "none" {
		what = "a Redis " + typ
	}
	if typ == "hash" {
		// The shape of a semaphore's permits and of a read-write lock's
		// holds: the likely cause is a mix of kinds on one name.
		return fmt.Errorf("key %s holds a Redis hash, not a lock of the kind asked for (a counting semaphore, WithPermits, and a read-write lock, WithRead or WithWrite, keep their holds in one); it was left untouched: %w", lockstate.QuoteKey(k), lockswap.ErrInvalid)
	}
	return fmt.Errorf("key %s holds %s, not a lock; it was left untouched: %w", lockstate.QuoteKey(k), what, lockswap.ErrInvalid)
}

// Extend is one compare-and-pexpire (for a permit or a read-write hold,
// its extend script).
func (p *proto) Extend(ctx context.Context, c *driver.Claim[ref], ttl time.Duration) (driver.Grant, error) {
	var (
		v   any
		err error
	)
	switch {
	case c.Permits > 0:
		v, err = p.c.Run(ctx, permitExtend, c.Data.keys[:], c.Token, ttl.Milliseconds())
	case c.RW != lockswap.NotRW:
		v, err = p.c.Run(ctx, rwExtend, c.Data.keys[:], c.Token, ttl.Milliseconds(), rwMode(c))
	default:
		v, err = p.c.Run(ctx, extendScript, c.Data.keys[:], c.Token, ttl.Milliseconds())
	}
	if err != nil {
		return driver.Grant{}, redisclient.ClassifyHeld(p.c, err)
	}
	if n, _ := v.(int64); n != 1 {
		return driver.Grant{}, lockswap.ErrLost
	}
	return driver.Grant{}, nil
}

var errNotOurs = fmt.Errorf("no longer ours: %w", lockswap.ErrLost)

// Release is one compare-and-delete (for a permit or a read-write hold,
// its release script).
func (p *proto) Release(ctx context.Context, c *driver.Claim[ref]) error {
	var (
		v   any
		err error
	)
	switch {
	case c.Permits > 0:
		v, err = p.c.Run(ctx, permitRelease, c.Data.keys[:], c.Data.tokenArg[:]...)
	case c.RW != lockswap.NotRW:
		v, err = p.c.Run(ctx, rwRelease, c.Data.keys[:], c.Token, rwMode(c))
	default:
		v, err = p.c.Run(ctx, releaseScript, c.Data.keys[:], c.Data.tokenArg[:]...)
	}
	if err != nil {
		return redisclient.ClassifyHeld(p.c, err)
	}
	if n, _ := v.(int64); n != 1 {
		return errNotOurs
	}
	return nil
}

// HandOver releases held and makes next's attempt in one request (the
// hand-over scripts): one round trip instead of two.
func (p *proto) HandOver(ctx context.Context, held, next *driver.Claim[ref]) (driver.Grant, error, func() error) {
	g, acqErr, relErr := p.handOver(ctx, held, next)
	return g, acqErr, answered(relErr)
}

// answered returns a function that returns err, known already: the
// release of a hand-over is decided by its one request.
func answered(err error) func() error {
	switch err {
	case nil:
		return releasedNil
	case errNotOurs:
		return releasedNotOurs
	}
	return func() error { return err }
}

func releasedNil() error     { return nil }
func releasedNotOurs() error { return errNotOurs }

// handOver is the one request of HandOver: next's result and held's.
func (p *proto) handOver(ctx context.Context, held, next *driver.Claim[ref]) (driver.Grant, error, error) {
	k := held.Data.keys[0]
	next.Data.set(k, next.Token)
	script, keys := handOver, held.Data.keys[:]
	if p.fence {
		script, keys = fencedHandOver, []string{k, FenceKey(k)}
	}
	v, err := p.c.Run(ctx, script, keys, held.Token, next.Token, next.TTL.Milliseconds(), fenceCounterTTL.Milliseconds())
	released, acquired, ok := redisscript.ParseHandOver(v)
	if err == nil && !ok {
		err = fmt.Errorf("unexpected hand-over reply %v", v)
	}
	if err != nil {
		if redisclient.IsWrongType(err) {
			return driver.Grant{}, fmt.Errorf("key %s (or its fence counter) holds another Redis type, not a lock; it was left untouched: %w", lockstate.QuoteKey(k), lockswap.ErrInvalid), errNotOurs
		}
		err = redisclient.Classify(p.c, err)
		return driver.Grant{}, err, err
	}
	var releaseErr error
	if !released {
		releaseErr = errNotOurs
	}
	switch {
	case acquired > 0:
		var g driver.Grant
		if p.fence {
			g.Fence = uint64(acquired)
		}
		return g, nil, releaseErr
	case acquired < 0:
		return driver.Grant{}, fenceError(FenceKey(k), acquired), releaseErr
	}
	return driver.Grant{}, lockswap.ErrHeld, releaseErr
}
