// Package singleredis is a lockswap backend on one Redis: acquire is one
// SET key token NX PX ttl, release one EVALSHA compare-and-delete, extend one
// EVALSHA compare-and-pexpire.
//
// The stored value is the plain random token, so any other client that
// follows the standard single-instance scheme (SET NX PX with a random
// value, compare-and-delete on release) on the same key excludes lockswap
// and is excluded by it.
//
// With Options.Fence, acquire is one EVALSHA that does the SET NX PX and an
// INCR of a fence counter in the same hash slot (so it works on Redis
// Cluster too); Lock.Fence returns the counter's value.
//
// One Redis is one point of failure: a restart without persistence or a
// failover to an asynchronous replica loses the lock (see Guarantees).
package singleredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/redisclient"
)

// Options configure a Locker. The zero value is usable.
type Options struct {
	// Prefix is prepended to every key in Redis ("app:" makes lock "x" the
	// key "app:x").
	Prefix string
	// Fence enables fencing: a counter per key, incremented by every
	// acquisition in the same script as the SET.
	Fence bool
	// Retry is Acquire's default retry policy; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// Closer, when set, is closed by Locker.Close (for a client the Locker
	// owns, such as one opened from a URL).
	Closer io.Closer
}

// DefaultRetry is the retry policy Acquire uses when none is given: a random
// delay of 5 to 25 ms between attempts, until the context ends. A constant
// jittered interval keeps waiters fair (exponential backoff favours
// newcomers).
var DefaultRetry = lockswap.JitterRetry(5*time.Millisecond, 25*time.Millisecond)

// FenceSuffix is appended to the fence counter's key.
const FenceSuffix = ":fence"

var (
	releaseScript = redisclient.CompareAndDelete
	extendScript  = redisclient.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)
	// The counter is checked and incremented before the SET, so that a
	// counter that is not a non-negative integer fails the attempt (-1)
	// before anything is written.
	fencedAcquire = redisclient.NewScript(`if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local cur = redis.call("GET", KEYS[2])
if cur and not string.match(cur, "^%d+$") then return -1 end
local fence = redis.call("INCR", KEYS[2])
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return fence`)
	// The hand-over scripts release our lock and make the first local
	// waiter's attempt in one request: exactly the release script followed
	// by the acquire (SET NX PX, or the fenced acquire script) with the
	// waiter's token, run atomically. They return {released, acquired}
	// (fenced: acquired is the new fence, 0 when the key is held, -1 when
	// the counter is not a non-negative integer, or not a string at all:
	// pcall, so that our release, already done, is still reported).
	handOver       = redisclient.HandOver
	fencedHandOver = redisclient.NewScript(`local released = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) released = 1 end
if redis.call("EXISTS", KEYS[1]) == 1 then return {released, 0} end
local cur = redis.pcall("GET", KEYS[2])
if type(cur) == "table" or (cur and not string.match(cur, "^%d+$")) then return {released, -1} end
local fence = redis.call("INCR", KEYS[2])
redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
return {released, fence}`)
)

// Locker is the single-Redis lockswap.Locker.
type Locker struct {
	c      redisclient.Client
	opts   Options
	closed atomic.Bool
	q      *localq.Queue // this Locker's waiters, per key, in arrival order
}

var _ lockswap.Locker = (*Locker)(nil)

// New returns a Locker over c. A nil client is rejected with an error
// matching lockswap.ErrInvalid.
func New(c redisclient.Client, opts Options) (*Locker, error) {
	if redisclient.IsNil(c) {
		return nil, fmt.Errorf("singleredis: nil redis client: %w", lockswap.ErrInvalid)
	}
	if opts.Retry == nil {
		opts.Retry = DefaultRetry
	}
	return &Locker{c: c, opts: opts, q: localq.New("singleredis")}, nil
}

// Guarantees describes the single-Redis lock.
func (lk *Locker) Guarantees() lockswap.Guarantees {
	return Guarantees(lk.opts.Fence)
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
		Notes: []string{
			"a restart without persistence or a failover to an async replica loses the lock",
		},
	}
	if fence {
		g.Notes = append(g.Notes, "the fence counter lives in the same Redis: it survives only what the data survives")
	}
	return g
}

// Close marks the Locker closed and closes Options.Closer if set. Acquire
// calls still waiting return an error matching lockswap.ErrClosed. Held
// locks are not released; they expire after their TTL.
func (lk *Locker) Close() error {
	if lk.closed.Swap(true) {
		return nil
	}
	lk.q.Close()
	if lk.opts.Closer != nil {
		return lk.opts.Closer.Close()
	}
	return nil
}

// String names the backend and client, without credentials.
func (lk *Locker) String() string { return "singleredis(" + lk.c.String() + ")" }

// FenceKey returns the key of the fence counter for the Redis key k, in the
// same Redis Cluster hash slot as k: "{k}:fence", or "k:fence" when k has a
// hash tag of its own. A key that contains "}" without a valid hash tag
// cannot share a slot with any other key; on Redis Cluster, fenced locks on
// such keys fail with Redis's CROSSSLOT error (reported as ErrUnavailable).
func FenceKey(k string) string {
	if hasHashTag(k) || strings.ContainsRune(k, '}') {
		// k's own hash tag (its first {...}) is kept by a suffix.
		return k + FenceSuffix
	}
	return "{" + k + "}" + FenceSuffix
}

// hasHashTag reports whether k has a Redis Cluster hash tag: a "{" followed
// later by a "}" with at least one character between them.
func hasHashTag(k string) bool {
	open := strings.IndexByte(k, '{')
	if open < 0 {
		return false
	}
	close := strings.IndexByte(k[open+1:], '}')
	return close > 0
}

// Acquire waits for the lock per the retry policy (Options.Retry or
// lockswap.WithRetry) until ctx ends.
//
// The goroutines that wait for the same key through this Locker queue in
// arrival order and only the first of them polls Redis; when a lock taken
// through this Locker is released, the first waiter tries at once. An
// Acquire that finds others of this Locker waiting for its key joins the
// back of the line. A retry policy that never retries (lockswap.NoRetry)
// makes one attempt without queueing. The order is local to this Locker:
// other processes and Lockers still poll and may take the key first.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	first := true
	return lk.q.AcquireOffer(ctx, key, o.Retry, o.TTL, func(ctx context.Context) (lockswap.Lock, error) {
		l, err := lk.try(ctx, key, o.TTL, first)
		first = false
		return l, err
	})
}

// TryAcquire makes one attempt. It does not queue behind the Locker's
// waiting Acquire calls: when the key is free it may take it before them.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	return lk.try(ctx, key, o.TTL, true)
}

func (lk *Locker) prepare(key string, opts []lockswap.Option) (lockswap.Options, error) {
	return lockswap.PrepareAcquire("singleredis", lk.closed.Load(), key, lk.opts.Retry, opts)
}

// try makes one attempt; a caller that gives up while the request is on
// its way gets no lock and leaves none (see internal/attempt).
func (lk *Locker) try(ctx context.Context, key string, ttl time.Duration, checkType bool) (lockswap.Lock, error) {
	return attempt.Run(ctx, func(ctx context.Context) (lockswap.Lock, error) { return lk.tryOnce(ctx, key, ttl, checkType) })
}

// tryOnce makes one attempt. checkType asks, when the key is taken,
// whether it holds a string at all (one extra round trip on the first
// failed attempt only), so that someone else's data under the key is
// reported as such.
func (lk *Locker) tryOnce(ctx context.Context, key string, ttl time.Duration, checkType bool) (lockswap.Lock, error) {
	k := lk.opts.Prefix + key
	token := lockstate.NewToken()
	start := time.Now()
	var (
		ok    bool
		fence uint64
		err   error
	)
	if lk.opts.Fence {
		var v any
		v, err = lk.c.Run(ctx, fencedAcquire, []string{k, FenceKey(k)}, token, ttl.Milliseconds())
		if err == nil {
			n, isInt := v.(int64)
			if !isInt || n < 0 {
				return nil, fmt.Errorf("singleredis: acquire %q: the fence counter %q does not hold a non-negative integer; it was left untouched: %w", key, FenceKey(k), lockswap.ErrInvalid)
			}
			ok, fence = n > 0, uint64(n)
		}
	} else {
		ok, err = lk.c.SetNXPX(ctx, k, token, ttl)
	}
	if err != nil {
		if redisclient.IsWrongType(err) {
			return nil, fmt.Errorf("singleredis: acquire %q: the fence counter %q holds another Redis type: %w", key, FenceKey(k), lockswap.ErrInvalid)
		}
		if !isDialError(err) {
			// The SET may have been applied before the error: remove it if
			// so. A failed dial sent nothing, so there is nothing to undo.
			lk.cleanup(ctx, k, token)
		}
		return nil, fmt.Errorf("singleredis: acquire %q on %s: %w: %w", key, lk.c, lockswap.ErrUnavailable, err)
	}
	if !ok {
		if checkType {
			if err := lk.checkStringKey(ctx, key, k); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("singleredis: acquire %q: %w", key, lockswap.ErrHeld)
	}
	return lk.newLock(key, k, token, fence, start, ttl), nil
}

// newLock returns the lock taken under k with token by a request sent at
// start.
func (lk *Locker) newLock(key, k, token string, fence uint64, start time.Time, ttl time.Duration) *lock {
	l := &lock{lk: lk, k: k}
	l.keys[0], l.tokenArg[0] = k, token
	l.Init(key, token, fence, lk.opts.Fence, start.Add(ttl-lockstate.Drift(ttl)))
	return l
}

// isDialError reports whether err is a failure to connect: the command was
// never sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// checkStringKey returns an ErrInvalid error when k holds a non-string
// value: that is not a lock, and no amount of waiting will free it.
func (lk *Locker) checkStringKey(ctx context.Context, key, k string) error {
	v, err := lk.c.Do(ctx, "TYPE", k)
	if err != nil {
		return fmt.Errorf("singleredis: acquire %q on %s: %w: %w", key, lk.c, lockswap.ErrUnavailable, err)
	}
	if typ, _ := v.(string); typ != "string" && typ != "none" {
		return fmt.Errorf("singleredis: acquire %q: key %q holds a Redis %s, not a lock; it was left untouched: %w", key, k, typ, lockswap.ErrInvalid)
	}
	return nil
}

func (lk *Locker) cleanup(ctx context.Context, k, token string) {
	cctx, cancel := lockswap.CleanupContext(ctx)
	defer cancel()
	_, _ = lk.c.Run(cctx, releaseScript, []string{k}, token)
}

// lock is a held single-Redis lock.
type lock struct {
	lockstate.State
	lk       *Locker
	k        string
	keys     [1]string // KEYS of the scripts, kept to spare an allocation per call
	tokenArg [1]any    // ARGV[1] of the release script
	released atomic.Bool
}

func (l *lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := lockswap.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("singleredis: extend %q: %w", l.Key(), err)
	}
	if l.Ended() || !time.Now().Before(l.Deadline()) {
		l.End()
		return fmt.Errorf("singleredis: extend %q: validity already over: %w", l.Key(), lockswap.ErrLost)
	}
	start := time.Now()
	v, err := l.lk.c.Run(ctx, extendScript, []string{l.k}, l.Token(), ttl.Milliseconds())
	if err != nil {
		if redisclient.IsWrongType(err) {
			l.End()
			return fmt.Errorf("singleredis: extend %q: key now holds another type: %w", l.Key(), lockswap.ErrLost)
		}
		return fmt.Errorf("singleredis: extend %q on %s: %w: %w", l.Key(), l.lk.c, lockswap.ErrUnavailable, err)
	}
	if n, _ := v.(int64); n != 1 {
		l.End()
		return fmt.Errorf("singleredis: extend %q: %w", l.Key(), lockswap.ErrLost)
	}
	if !l.SetDeadline(start.Add(ttl - lockstate.Drift(ttl))) {
		return fmt.Errorf("singleredis: extend %q: lock ended while extending: %w", l.Key(), lockswap.ErrLost)
	}
	return nil
}

func (l *lock) Release(ctx context.Context) error {
	if l.released.Load() {
		return nil
	}
	if t := l.lk.q.Claim(l.Key(), l); t != nil {
		return l.releaseHandingOver(ctx, t)
	}
	v, err := l.runRelease(ctx)
	if err != nil && !redisclient.IsWrongType(err) {
		return fmt.Errorf("singleredis: release %q on %s: %w: %w", l.Key(), l.lk.c, lockswap.ErrUnavailable, err)
	}
	l.End()
	// Our key is free (or was lost): the next local waiter tries now.
	l.lk.q.Released(l.Key(), l)
	if n, _ := v.(int64); n != 1 {
		return fmt.Errorf("singleredis: release %q: no longer ours: %w", l.Key(), lockswap.ErrLost)
	}
	l.released.Store(true)
	return nil
}

// releaseHandingOver releases l and, in the same request, makes the
// attempt of the first local waiter (claimed by t): a hand-over inside one
// process costs one round trip instead of two, and the waiter is woken with
// its result instead of being woken to send its request.
func (l *lock) releaseHandingOver(ctx context.Context, t *localq.Ticket) error {
	lk, key := l.lk, l.Key()
	ttl := t.TTL()
	token := lockstate.NewToken()
	script, keys := handOver, l.keys[:]
	if lk.opts.Fence {
		script, keys = fencedHandOver, []string{l.k, FenceKey(l.k)}
	}
	// The claimed waiter waits for this request whatever its own context
	// does, so the request is bounded even when ctx is not.
	hctx, cancel := context.WithTimeout(ctx, lockswap.CleanupTimeout)
	defer cancel()
	start := time.Now()
	v, err := runCleanly(hctx, func(ctx context.Context) (any, error) {
		return lk.c.Run(ctx, script, keys, l.Token(), token, ttl.Milliseconds())
	})
	released, acquired, ok := parseHandOver(v)
	if err == nil && !ok {
		err = fmt.Errorf("unexpected hand-over reply %v", v)
	}
	if err != nil {
		if redisclient.IsWrongType(err) {
			l.End()
			t.Deliver(nil, fmt.Errorf("singleredis: acquire %q: key %q (or its fence counter) holds another Redis type, not a lock; it was left untouched: %w", key, l.k, lockswap.ErrInvalid))
			return fmt.Errorf("singleredis: release %q: no longer ours: %w", key, lockswap.ErrLost)
		}
		// Unknown outcome: the waiter's SET may have been applied.
		lk.cleanup(ctx, l.k, token)
		t.Deliver(nil, fmt.Errorf("singleredis: acquire %q on %s: %w: %w", key, lk.c, lockswap.ErrUnavailable, err))
		return fmt.Errorf("singleredis: release %q on %s: %w: %w", key, lk.c, lockswap.ErrUnavailable, err)
	}
	l.End()
	switch {
	case acquired > 0:
		var fence uint64
		if lk.opts.Fence {
			fence = uint64(acquired)
		}
		t.Deliver(lk.newLock(key, l.k, token, fence, start, ttl), nil)
	case acquired < 0:
		t.Deliver(nil, fmt.Errorf("singleredis: acquire %q: the fence counter %q does not hold a non-negative integer; it was left untouched: %w", key, FenceKey(l.k), lockswap.ErrInvalid))
	default:
		t.Deliver(nil, fmt.Errorf("singleredis: acquire %q: %w", key, lockswap.ErrHeld))
	}
	if !released {
		return fmt.Errorf("singleredis: release %q: no longer ours: %w", key, lockswap.ErrLost)
	}
	l.released.Store(true)
	return nil
}

// parseHandOver reads a hand-over script's reply {released, acquired}.
func parseHandOver(v any) (released bool, acquired int64, ok bool) {
	a, isArr := v.([]any)
	if !isArr || len(a) != 2 {
		return false, 0, false
	}
	r, ok1 := a[0].(int64)
	n, ok2 := a[1].(int64)
	return r == 1, n, ok1 && ok2
}

// runCleanly runs call under ctx while ctx is alive, and under a cleanup
// context (see lockswap.CleanupContext) when ctx is already done or ends
// during the call: a release must not be skipped because the caller gave
// up.
func runCleanly(ctx context.Context, call func(context.Context) (any, error)) (any, error) {
	if ctx.Err() == nil {
		v, err := call(ctx)
		if err == nil || ctx.Err() == nil {
			return v, err
		}
	}
	cctx, cancel := lockswap.CleanupContext(ctx)
	defer cancel()
	return call(cctx)
}

// runRelease runs the release script under ctx while ctx is alive, and
// under a cleanup context (see lockswap.CleanupContext) when ctx is already
// done or ends during the call: a release must not be skipped because the
// caller gave up.
func (l *lock) runRelease(ctx context.Context) (any, error) {
	return runCleanly(ctx, func(ctx context.Context) (any, error) {
		return l.lk.c.Run(ctx, releaseScript, l.keys[:], l.tokenArg[:]...)
	})
}

// Locate returns the Redis server and key under which the lock named key is
// stored (see migrate.Locator).
func (lk *Locker) Locate(key string) (store, storedKey string) {
	return lk.c.String(), lk.opts.Prefix + key
}
