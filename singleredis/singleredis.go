// Package singleredis is a lockswap backend on one Redis: acquire is one
// SET key token NX PX ttl, release one EVALSHA compare-and-delete, extend one
// EVALSHA compare-and-pexpire.
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
	"github.com/lockswap/lockswap/internal/background"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
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
	// TTL is the default lock TTL for Acquire and TryAcquire; 0 means
	// lockswap.DefaultTTL. A call's lockswap.WithTTL wins over it.
	TTL time.Duration
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
	// The fenced acquire: SET NX PX plus the next fence (see nextFenceLua),
	// stored in the counter. Everything is checked before anything is
	// written (Redis does not roll back a script that fails halfway): the
	// reply is the new fence (> 0), 0 when the key is held, or one of the
	// negative fence* codes, with nothing written.
	fencedAcquire = redisclient.NewScript(nextFenceLua + `if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local fence = next_fence(KEYS[2])
if fence < 0 then return fence end
redis.call("SET", KEYS[2], string.format("%.0f", fence))
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return fence`)
	// The hand-over scripts release our lock and make the first local
	// waiter's attempt in one request: exactly the release script followed
	// by the acquire (SET NX PX, or the fenced acquire script) with the
	// waiter's token, run atomically. They return {released, acquired}
	// (fenced: acquired is the new fence, 0 when the key is held, or a
	// negative fence* code when the counter is unusable: then nothing but
	// our release, already done and still reported, was written).
	handOver       = redisclient.HandOver
	fencedHandOver = redisclient.NewScript(nextFenceLua + `local released = 0
if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("DEL", KEYS[1]) released = 1 end
if redis.call("EXISTS", KEYS[1]) == 1 then return {released, 0} end
local fence = next_fence(KEYS[2])
if fence < 0 then return {released, fence} end
redis.call("SET", KEYS[2], string.format("%.0f", fence))
redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3])
return {released, fence}`)
)

// fenceLimit bounds the fences: every fence is below 2^53, so that Lua's
// numbers, float64 and JSON carry it exactly.
const fenceLimit = 1 << 53

// The replies of the fenced scripts below 1 (a fence is at least 1).
const (
	fenceHeld       = 0  // the lock key is held: nothing was written
	fenceNotInteger = -1 // the counter holds a string that is not a non-negative integer
	fenceTooLarge   = -2 // the counter is so high that the next fence would reach 2^53
	fenceWrongType  = -3 // the counter holds another Redis type
)

// nextFenceLua starts both fenced scripts. It switches a Redis older than 5
// to effects replication, which every Redis since 5 uses by default (the
// only mode since 7), so that writes may follow TIME: replicas and the AOF
// receive the counter's new value, not the script to run again.
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
const nextFenceLua = `if redis.replicate_commands then redis.replicate_commands() end
local function next_fence(k)
  local typ = redis.call("TYPE", k)["ok"]
  if typ ~= "none" and typ ~= "string" then return -3 end
  local n = 0
  local cur = redis.call("GET", k)
  if cur then
    if not string.match(cur, "^%d+$") then return -1 end
    n = tonumber(cur)
    if not n then return -2 end
  end
  local t = redis.call("TIME")
  local f = math.max(n + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  if f >= 9007199254740992 then return -2 end
  return f
end
`

// parseFence reads a fenced acquire's reply: held (a fence), or not
// (0), or an ErrInvalid error for a counter that cannot give a fence.
func parseFence(v any, key, counterKey string) (ok bool, fence uint64, err error) {
	n, isInt := v.(int64)
	switch {
	case !isInt:
		return false, 0, fmt.Errorf("singleredis: acquire %s: unexpected reply %v from the fenced acquire script (fence counter %s): %w",
			lockstate.QuoteKey(key), v, lockstate.QuoteKey(counterKey), lockswap.ErrInvalid)
	case n == fenceHeld:
		return false, 0, nil
	case n < 0 || n >= fenceLimit:
		return false, 0, fenceError(key, counterKey, n)
	}
	return true, uint64(n), nil
}

// fenceError is the error of an attempt whose fenced script answered code
// (< 0): the counter cannot give a fence, and the script wrote nothing.
// It matches lockswap.ErrInvalid: no retry will change the counter.
func fenceError(key, counterKey string, code int64) error {
	var what string
	switch code {
	case fenceNotInteger:
		what = "does not hold a non-negative integer"
	case fenceTooLarge:
		what = "is too high: the next fence would not be below 2^53 (9007199254740992)"
	case fenceWrongType:
		what = "holds another Redis type, not a counter"
	default:
		what = fmt.Sprintf("gave the unexpected reply %d", code)
	}
	return fmt.Errorf("singleredis: acquire %s: the fence counter %s %s; the lock key and the counter were left untouched: %w",
		lockstate.QuoteKey(key), lockstate.QuoteKey(counterKey), what, lockswap.ErrInvalid)
}

// Locker is the single-Redis lockswap.Locker.
type Locker struct {
	c      redisclient.Client
	opts   Options
	closed atomic.Bool
	q      *localq.Queue    // this Locker's waiters, per key, in arrival order
	bg     background.Group // cleanup that outlives its caller
}

var _ lockswap.Locker = (*Locker)(nil)

// New returns a Locker over c. A nil client is rejected with an error
// matching lockswap.ErrInvalid.
func New(c redisclient.Client, opts Options) (*Locker, error) {
	if redisclient.IsNil(c) {
		return nil, fmt.Errorf("singleredis: nil redis client: %w", lockswap.ErrInvalid)
	}
	if err := opts.checkTTL(); err != nil {
		return nil, err
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
		g.Notes = append(g.Notes,
			"a fence is max(counter + 1, the server's clock in microseconds), always below 2^53: fences keep increasing across a restart without persistence unless the server's clock is set back across it by more than the downtime",
			"after a failover fences keep increasing unless the promoted replica's clock is behind the old primary's by more than the time from the old primary's last fence to the new one's first: a replica that lags in data only repeats no fence",
			"while two primaries take writes at once (split brain) each gives fences from its own clock: they interleave and can coincide",
		)
	}
	return g
}

// Close marks the Locker closed and closes Options.Closer if set. Acquire
// calls still waiting return an error matching lockswap.ErrClosed, and so
// do Extend and Release of its locks from then on. Held locks are not
// released; they expire after their TTL. Releases still running in the
// background get up to half a second to finish.
func (lk *Locker) Close() error {
	if lk.closed.Swap(true) {
		return nil
	}
	lk.q.Close()
	lk.bg.Close()
	if lk.opts.Closer != nil {
		return lk.opts.Closer.Close()
	}
	return nil
}

// String names the backend and client, without credentials.
func (lk *Locker) String() string { return "singleredis(" + lk.c.String() + ")" }

// TTLRange returns the TTLs Acquire, TryAcquire and Extend accept:
// [lockswap.MinTTL, lockswap.MaxTTL]. Redis keeps expiries to the
// millisecond, and at the minimum the clock drift allowance still leaves
// most of the TTL as validity.
func (lk *Locker) TTLRange() (min, max time.Duration) { return lockswap.MinTTL, lockswap.MaxTTL }

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
	return lk.q.AcquireOffer(ctx, key, o.Retry, o.TTL, lockswap.LimitOutage(o.MaxOutage, func(ctx context.Context) (lockswap.Lock, error) {
		l, err := lk.try(ctx, key, o.TTL, first)
		first = false
		return l, err
	}))
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
	return lockswap.PrepareAcquire("singleredis", lk.closed.Load(), key, lk.opts.Retry, lk.withTTL(opts))
}

// try makes one attempt; a caller that gives up while the request is on
// its way gets no lock and leaves none (see internal/attempt).
func (lk *Locker) try(ctx context.Context, key string, ttl time.Duration, checkType bool) (lockswap.Lock, error) {
	return attempt.Run(ctx, &lk.bg, func(ctx context.Context) (lockswap.Lock, error) { return lk.tryOnce(ctx, key, ttl, checkType) })
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
			var ferr error
			if ok, fence, ferr = parseFence(v, key, FenceKey(k)); ferr != nil {
				return nil, ferr
			}
		}
	} else {
		ok, err = lk.c.SetNXPX(ctx, k, token, ttl)
	}
	if err != nil {
		if redisclient.IsWrongType(err) {
			return nil, fmt.Errorf("singleredis: acquire %s: the fence counter %s holds another Redis type: %w", lockstate.QuoteKey(key), lockstate.QuoteKey(FenceKey(k)), lockswap.ErrInvalid)
		}
		if redisclient.IsPermanent(err) {
			return nil, fmt.Errorf("singleredis: acquire %s on %s: %s: %w: %w", lockstate.QuoteKey(key), lk.c, redisclient.PermanentReason(err), lockswap.ErrInvalid, err)
		}
		if !isDialError(err) {
			// The SET may have been applied before the error: remove it if
			// so. A failed dial sent nothing, so there is nothing to undo.
			lk.cleanup(ctx, k, token)
		}
		return nil, fmt.Errorf("singleredis: acquire %s on %s: %w: %w", lockstate.QuoteKey(key), lk.c, lockswap.ErrUnavailable, err)
	}
	if !ok {
		if checkType {
			if err := lk.checkStringKey(ctx, key, k); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("singleredis: acquire %s: %w", lockstate.QuoteKey(key), lockswap.ErrHeld)
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
		return fmt.Errorf("singleredis: acquire %s on %s: %w: %w", lockstate.QuoteKey(key), lk.c, lockswap.ErrUnavailable, err)
	}
	if typ, _ := v.(string); typ != "string" && typ != "none" {
		return fmt.Errorf("singleredis: acquire %s: key %s holds a Redis %s, not a lock; it was left untouched: %w", lockstate.QuoteKey(key), lockstate.QuoteKey(k), typ, lockswap.ErrInvalid)
	}
	return nil
}

// cleanup removes, in the background, the lock under k if it holds token:
// a request whose outcome is unknown may have taken it. It is done when
// the compare-and-delete removed the key, or when two of them answered one
// after the other: the lost request may still be waiting on the server on
// its abandoned connection and run after a request sent later on another,
// but the server reads every connection with data before it answers, so
// the second answer comes after the lost request ran.
func (lk *Locker) cleanup(ctx context.Context, k, token string) {
	lk.bg.Go(ctx, func(ctx context.Context) {
		answers := 0
		background.Retry(ctx, func(ctx context.Context) bool {
			v, err := lk.c.Run(ctx, releaseScript, []string{k}, token)
			if redisclient.IsTransport(err) {
				return false
			}
			answers++
			n, _ := v.(int64)
			return n == 1 || answers >= 2 || err != nil
		})
	})
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
		return fmt.Errorf("singleredis: extend %s: %w", lockstate.QuoteKey(l.Key()), err)
	}
	if l.lk.closed.Load() {
		return fmt.Errorf("singleredis: extend %s: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrClosed)
	}
	if l.Ended() || !time.Now().Before(l.Deadline()) {
		l.End()
		return fmt.Errorf("singleredis: extend %s: validity already over: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	start := time.Now()
	rctx, stop := attempt.Context(ctx, attempt.Timeout)
	v, err := l.lk.c.Run(rctx, extendScript, []string{l.k}, l.Token(), ttl.Milliseconds())
	stop()
	if err != nil {
		if redisclient.IsWrongType(err) {
			l.End()
			return fmt.Errorf("singleredis: extend %s: key now holds another type: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
		}
		if redisclient.IsPermanent(err) {
			return fmt.Errorf("singleredis: extend %s on %s: %s: %w: %w", lockstate.QuoteKey(l.Key()), l.lk.c, redisclient.PermanentReason(err), lockswap.ErrInvalid, err)
		}
		return fmt.Errorf("singleredis: extend %s on %s: %w: %w", lockstate.QuoteKey(l.Key()), l.lk.c, lockswap.ErrUnavailable, err)
	}
	if n, _ := v.(int64); n != 1 {
		l.End()
		return fmt.Errorf("singleredis: extend %s: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	if !l.SetDeadline(start.Add(ttl - lockstate.Drift(ttl))) {
		return fmt.Errorf("singleredis: extend %s: lock ended while extending: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	return nil
}

func (l *lock) Release(ctx context.Context) error {
	if l.released.Load() {
		return nil
	}
	if l.lk.closed.Load() {
		return fmt.Errorf("singleredis: release %s: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrClosed)
	}
	if t := l.lk.q.ClaimBy(l.Key(), l, attempt.Limit(ctx, lockswap.CleanupTimeout)); t != nil {
		return l.releaseHandingOver(ctx, t)
	}
	// One request answers almost every release; the retries and the
	// background continuation (attempt.Release) are for the rest.
	start := time.Now()
	rctx, stop := attempt.Context(ctx, lockswap.CleanupTimeout)
	limit, _ := rctx.Deadline()
	v, err := l.runRelease(rctx)
	stop()
	var pending bool
	if redisclient.IsTransport(err) {
		v, err, pending = attempt.Release(ctx, &l.lk.bg, start, limit, v, err, l.runRelease, redisclient.IsTransport, func(v any, err error) {
			if err == nil {
				if n, _ := v.(int64); n == 1 {
					l.released.Store(true)
				}
				l.End()
				l.lk.q.Released(l.Key(), l)
			}
		})
	}
	if err != nil && !redisclient.IsWrongType(err) {
		if redisclient.IsPermanent(err) {
			return fmt.Errorf("singleredis: release %s on %s: %s: %w: %w", lockstate.QuoteKey(l.Key()), l.lk.c, redisclient.PermanentReason(err), lockswap.ErrInvalid, err)
		}
		if pending {
			return fmt.Errorf("singleredis: release %s on %s: outcome unknown at the deadline, still releasing in the background: %w: %w", lockstate.QuoteKey(l.Key()), l.lk.c, lockswap.ErrUnavailable, err)
		}
		return fmt.Errorf("singleredis: release %s on %s: %w: %w", lockstate.QuoteKey(l.Key()), l.lk.c, lockswap.ErrUnavailable, err)
	}
	l.End()
	// Our key is free (or was lost): the next local waiter tries now.
	l.lk.q.Released(l.Key(), l)
	if n, _ := v.(int64); n != 1 {
		return fmt.Errorf("singleredis: release %s: no longer ours: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
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
	hctx, stop := attempt.Context(ctx, lockswap.CleanupTimeout)
	start := time.Now()
	v, err := lk.c.Run(hctx, script, keys, l.Token(), token, ttl.Milliseconds())
	stop()
	released, acquired, ok := parseHandOver(v)
	if err == nil && !ok {
		err = fmt.Errorf("unexpected hand-over reply %v", v)
	}
	if err != nil {
		if redisclient.IsWrongType(err) {
			l.End()
			t.Deliver(nil, fmt.Errorf("singleredis: acquire %s: key %s (or its fence counter) holds another Redis type, not a lock; it was left untouched: %w", lockstate.QuoteKey(key), lockstate.QuoteKey(l.k), lockswap.ErrInvalid))
			return fmt.Errorf("singleredis: release %s: no longer ours: %w", lockstate.QuoteKey(key), lockswap.ErrLost)
		}
		if redisclient.IsPermanent(err) {
			werr := fmt.Errorf("singleredis: acquire %s on %s: %s: %w: %w", lockstate.QuoteKey(key), lk.c, redisclient.PermanentReason(err), lockswap.ErrInvalid, err)
			t.Deliver(nil, werr)
			return fmt.Errorf("singleredis: release %s on %s: %s: %w: %w", lockstate.QuoteKey(key), lk.c, redisclient.PermanentReason(err), lockswap.ErrInvalid, err)
		}
		// Unknown outcome: our release and the waiter's SET may have been
		// applied; both are undone (by token) in the background.
		lk.cleanup(ctx, l.k, token)
		lk.cleanup(ctx, l.k, l.Token())
		l.End()
		t.Deliver(nil, fmt.Errorf("singleredis: acquire %s on %s: %w: %w", lockstate.QuoteKey(key), lk.c, lockswap.ErrUnavailable, err))
		return fmt.Errorf("singleredis: release %s on %s: outcome unknown, still releasing in the background: %w: %w", lockstate.QuoteKey(key), lk.c, lockswap.ErrUnavailable, err)
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
		t.Deliver(nil, fenceError(key, FenceKey(l.k), acquired))
	default:
		t.Deliver(nil, fmt.Errorf("singleredis: acquire %s: %w", lockstate.QuoteKey(key), lockswap.ErrHeld))
	}
	if !released {
		return fmt.Errorf("singleredis: release %s: no longer ours: %w", lockstate.QuoteKey(key), lockswap.ErrLost)
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

// runRelease runs the release script once under ctx.
func (l *lock) runRelease(ctx context.Context) (any, error) {
	return l.lk.c.Run(ctx, releaseScript, l.keys[:], l.tokenArg[:]...)
}

// Locate returns the Redis server and key under which the lock named key is
// stored (see migrate.Locator).
func (lk *Locker) Locate(key string) (store, storedKey string) {
	return redisclient.Store(lk.c), lk.opts.Prefix + key
}
