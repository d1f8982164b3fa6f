// Package redlock is the lockswap backend for the Redlock algorithm over N
// independent Redis masters (no replication between them).
//
// Acquire reads the monotonic clock, then sends SET key token NX PX ttl to
// every instance at the same time, with one random token for all, each
// request bounded by a per-instance timeout that is small against the TTL.
// The lock is held when a majority (N/2+1) answered OK and the validity,
// TTL − elapsed − drift (drift = TTL × DriftFactor + DriftFixed), is still
// positive; Lock.Deadline is the start plus that validity. Otherwise the
// attempt is undone on every instance where the SET succeeded or its outcome
// is unknown, and Acquire retries after a random delay.
//
// The stored keys and values are those of every other Redlock client (a
// plain SET NX PX with one random value on each master, compare-and-delete
// on release), so another Redlock implementation on the same masters and
// key excludes lockswap and is excluded by it.
//
// With Options.RestartSafety, an instance that lost its data (a restart
// without persistence) is noticed on the acquire round trip itself and its
// votes are not counted until Options.MaxTTL has passed since then: the
// "delayed restart" of the Redlock design, done by the client. See
// docs/redlock.md for the algorithm, its parameters and its limits.
package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/redisclient"
)

// Defaults.
const (
	// DefaultDriftFactor and DefaultDriftFixed make the clock drift
	// allowance TTL × 0.01 + 2 ms.
	DefaultDriftFactor = lockstate.DriftFactor
	DefaultDriftFixed  = lockstate.DriftFixed
	// MinInstanceTimeout and MaxInstanceTimeout clamp the default
	// per-instance timeout, TTL/100.
	MinInstanceTimeout = 5 * time.Millisecond
	MaxInstanceTimeout = 50 * time.Millisecond
	// DefaultMaxExtensions bounds how many times one lock may be extended
	// when Options.MaxExtensions is zero.
	DefaultMaxExtensions = 1000
	// EpochKey is the key under which RestartSafety keeps each instance's
	// epoch: the server time at which a client first found the instance
	// without one, and a random tag. It has no expiry.
	EpochKey = "lockswap:redlock:epoch"
)

// DefaultRetry is Acquire's retry policy when none is given: a uniformly
// random delay of 10 to 50 ms, until the context ends. The randomness
// desynchronises clients that compete for the same key, so that one of them
// reaches a majority (the Redlock retry rule).
var DefaultRetry = lockswap.JitterRetry(10*time.Millisecond, 50*time.Millisecond)

// Options configure a Locker. The zero value is usable.
type Options struct {
	// Prefix is prepended to every key in Redis.
	Prefix string
	// Retry is Acquire's default retry policy; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// InstanceTimeout bounds each request to one instance, so that a dead
	// or slow instance costs that much and not the TTL. Zero means TTL/100
	// clamped to [MinInstanceTimeout, MaxInstanceTimeout], per call. It must
	// be small against the TTL: the validity is what is left of the TTL
	// after the slowest answer.
	InstanceTimeout time.Duration
	// DriftFactor and DriftFixed give the clock drift allowance
	// TTL × DriftFactor + DriftFixed subtracted from the validity. Zero
	// means the defaults (0.01 and 2 ms); use a negative DriftFixed for
	// none (DriftFactor may not be negative).
	DriftFactor float64
	DriftFixed  time.Duration
	// MaxExtensions bounds the number of successful extensions of one lock
	// (so that a holder that extends forever cannot starve the others).
	// Zero means DefaultMaxExtensions; negative means no bound.
	MaxExtensions int
	// MaxHold, when positive, bounds a lock's total hold time: Extend does
	// not move the deadline past acquisition + MaxHold.
	MaxHold time.Duration
	// RestartSafety makes the Locker notice, on the acquire round trip, an
	// instance that lost its data (restart without persistence) and not
	// count its votes until MaxTTL has passed since. It costs one Lua
	// script instead of a plain SET per acquire, and a wait of MaxTTL after
	// a fresh instance is first used. See docs/redlock.md.
	RestartSafety bool
	// MaxTTL is the longest TTL any client uses on these instances,
	// required with RestartSafety. Acquire rejects longer TTLs.
	MaxTTL time.Duration
	// Closers are closed by Locker.Close (clients the Locker owns).
	Closers []io.Closer
}

var (
	releaseScript  = redisclient.CompareAndDelete
	handOverScript = redisclient.HandOver
	extendScript   = redisclient.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)
	// safeAcquire is SET NX PX plus the instance's epoch: created from the
	// server clock when missing, returned (with the server time) only when
	// it differs from the one the client knows (ARGV[3]).
	safeAcquire = redisclient.NewScript(`local e = redis.call("GET", KEYS[2])
if not e then
  local t = redis.call("TIME")
  e = t[1] .. "." .. t[2] .. "." .. ARGV[1]
  redis.call("SET", KEYS[2], e)
end
local r = 0
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then r = 1 end
if e == ARGV[3] then return r end
local t = redis.call("TIME")
return {r, e, t[1], t[2]}`)
)

// instance is one master and what the Locker knows of it.
type instance struct {
	c       redisclient.Client
	epoch   atomic.Pointer[epochState] // RestartSafety only
	suspect atomic.Bool                // pipelined path: not answered yet or last request failed: use a worker
}

// epochState is the last epoch seen on an instance and until when its votes
// do not count.
type epochState struct {
	value string
	until time.Time
}

// Locker is the Redlock lockswap.Locker.
type Locker struct {
	inst   []instance
	split  []redisclient.Splitter // every client's, or nil: pipelined fan-out
	quorum int
	opts   Options
	closed atomic.Bool
	fan    *fanout
	q      *localq.Queue // this Locker's waiters, per key, in arrival order
}

var _ lockswap.Locker = (*Locker)(nil)

// New returns a Locker over the given independent masters. It rejects, with
// an error matching lockswap.ErrInvalid, an empty list, a nil client, the
// same client twice, a negative drift or timeout, and RestartSafety without
// MaxTTL. Any N ≥ 1 is accepted; an even N tolerates no more failures than
// N−1 does, so use an odd N.
func New(clients []redisclient.Client, opts Options) (*Locker, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("redlock: no redis clients: %w", lockswap.ErrInvalid)
	}
	if len(clients) > 64 {
		return nil, fmt.Errorf("redlock: %d redis clients: at most 64 are supported: %w", len(clients), lockswap.ErrInvalid)
	}
	for i, c := range clients {
		if redisclient.IsNil(c) {
			return nil, fmt.Errorf("redlock: redis client %d of %d is nil: %w", i, len(clients), lockswap.ErrInvalid)
		}
		for j, d := range clients[:i] {
			if sameClient(c, d) {
				return nil, fmt.Errorf("redlock: redis clients %d and %d are the same client or address (%s); Redlock needs independent masters: %w", j, i, c, lockswap.ErrInvalid)
			}
		}
	}
	switch {
	case opts.DriftFactor < 0 || opts.DriftFactor >= 0.5:
		return nil, fmt.Errorf("redlock: drift factor %v: want a factor in [0, 0.5) such as 0.01: %w", opts.DriftFactor, lockswap.ErrInvalid)
	case opts.InstanceTimeout < 0:
		return nil, fmt.Errorf("redlock: instance timeout %v is negative: %w", opts.InstanceTimeout, lockswap.ErrInvalid)
	case opts.MaxHold < 0:
		return nil, fmt.Errorf("redlock: max hold %v is negative: %w", opts.MaxHold, lockswap.ErrInvalid)
	case opts.MaxTTL < 0:
		return nil, fmt.Errorf("redlock: max TTL %v is negative: %w", opts.MaxTTL, lockswap.ErrInvalid)
	case opts.RestartSafety && opts.MaxTTL == 0:
		return nil, fmt.Errorf("redlock: RestartSafety needs MaxTTL, the longest TTL any client uses on these masters: %w", lockswap.ErrInvalid)
	}
	if opts.DriftFactor == 0 {
		opts.DriftFactor = DefaultDriftFactor
	}
	if opts.DriftFixed == 0 {
		opts.DriftFixed = DefaultDriftFixed
	} else if opts.DriftFixed < 0 {
		opts.DriftFixed = 0
	}
	if opts.MaxExtensions == 0 {
		opts.MaxExtensions = DefaultMaxExtensions
	}
	if opts.Retry == nil {
		opts.Retry = DefaultRetry
	}
	opts.Closers = append([]io.Closer(nil), opts.Closers...)
	lk := &Locker{inst: make([]instance, len(clients)), quorum: len(clients)/2 + 1, opts: opts, q: localq.New("redlock")}
	split := make([]redisclient.Splitter, 0, len(clients))
	for i, c := range clients {
		lk.inst[i].c = c
		if s, ok := c.(redisclient.Splitter); ok {
			split = append(split, s)
		}
	}
	if len(split) == len(clients) {
		lk.split = split // else not every client can: fan out on the workers
		// Until an instance has answered, its requests go to the workers,
		// so that the first connections are dialled in parallel.
		for i := range lk.inst {
			lk.inst[i].suspect.Store(true)
		}
	}
	lk.fan = newFanout(lk, 2*len(clients))
	return lk, nil
}

// sameClient reports whether a and b are the same client, or two clients
// that name the same address (a name with a port in it).
func sameClient(a, b redisclient.Client) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta == tb && ta.Comparable() && a == b {
		return true
	}
	sa := a.String()
	return strings.Contains(sa, ":") && sa == b.String()
}

// Quorum returns the number of instances that must agree: N/2+1.
func (lk *Locker) Quorum() int { return lk.quorum }

// Guarantees describes the Redlock lock over this Locker's instances.
func (lk *Locker) Guarantees() lockswap.Guarantees {
	return Guarantees(len(lk.inst), lk.opts.RestartSafety)
}

// Guarantees returns the Redlock backend's guarantees over n masters, with
// or without RestartSafety.
func Guarantees(n int, restartSafety bool) lockswap.Guarantees {
	g := lockswap.Guarantees{
		Backend:          "redlock",
		Fencing:          false,
		SurvivesFailover: true,
		SurvivesRestart:  restartSafety,
		Clock:            lockswap.ClockBoundedDrift,
		Nodes:            n,
		Tolerates:        (n - 1) / 2,
		StaleReleaseSafe: true,
		Wait:             lockswap.WaitPoll,
		Notes: []string{
			"no fencing token: a holder paused past its validity acts without exclusion",
			"failover means the loss of a minority of independent masters; do not give the instances replicas that take over",
		},
	}
	if restartSafety {
		g.Notes = append(g.Notes, "a restarted instance's votes are ignored for MaxTTL after its restart is noticed")
	} else {
		g.Notes = append(g.Notes, "a restart without persistence of enough masters can let a second client in (enable RestartSafety)")
	}
	return g
}

// Close stops the Locker's workers and closes Options.Closers. Held locks
// are not released; they expire after their TTL.
func (lk *Locker) Close() error {
	if lk.closed.Swap(true) {
		return nil
	}
	lk.q.Close()
	lk.fan.close()
	var errs []error
	for _, c := range lk.opts.Closers {
		if c != nil {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// String names the backend and its instances, without credentials.
func (lk *Locker) String() string {
	var b strings.Builder
	b.WriteString("redlock(")
	for i := range lk.inst {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(lk.inst[i].c.String())
	}
	b.WriteString(")")
	return b.String()
}

// instanceTimeout is the per-instance timeout for a lock of ttl.
func (lk *Locker) instanceTimeout(ttl time.Duration) time.Duration {
	if lk.opts.InstanceTimeout > 0 {
		return lk.opts.InstanceTimeout
	}
	return min(max(ttl/100, MinInstanceTimeout), MaxInstanceTimeout)
}

func (lk *Locker) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*lk.opts.DriftFactor) + lk.opts.DriftFixed
}

// Acquire waits for the lock per the retry policy (Options.Retry or
// lockswap.WithRetry) until ctx ends. Goroutines of this Locker that wait
// for the same key wait in arrival order and only the first of them polls
// the instances; when a lock taken through this Locker is released, the
// first waiter tries at once instead of after its retry delay. An Acquire
// that finds others of this Locker waiting for its key joins the back of
// the line. A retry policy that never retries (lockswap.NoRetry) makes one
// attempt without queueing. The order is local to this Locker: other
// processes and Lockers still poll and may take the key first.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	var handOverTTL time.Duration
	if !lk.opts.RestartSafety {
		// A release through this Locker can take the key for us (see
		// lock.Release); the restart-safe acquire has no such form.
		handOverTTL = o.TTL
	}
	return lk.q.AcquireOffer(ctx, key, o.Retry, handOverTTL, func(ctx context.Context) (lockswap.Lock, error) {
		return lk.try(ctx, key, o.TTL)
	})
}

// TryAcquire makes one attempt. It does not queue behind the Locker's
// waiting Acquire calls: when the key is free it may take it before them.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	return lk.try(ctx, key, o.TTL)
}

func (lk *Locker) prepare(key string, opts []lockswap.Option) (lockswap.Options, error) {
	if lk.closed.Load() {
		return lockswap.Options{}, fmt.Errorf("redlock: acquire %q: %w", key, lockswap.ErrClosed)
	}
	if err := lockswap.ValidateKey(key); err != nil {
		return lockswap.Options{}, fmt.Errorf("redlock: acquire: %w", err)
	}
	o, err := lockswap.ApplyOptions(lk.opts.Retry, opts)
	if err != nil {
		return o, fmt.Errorf("redlock: acquire %q: %w", key, err)
	}
	if lk.opts.MaxTTL > 0 && o.TTL > lk.opts.MaxTTL {
		return o, fmt.Errorf("redlock: acquire %q: ttl %v exceeds MaxTTL %v: %w", key, o.TTL, lk.opts.MaxTTL, lockswap.ErrInvalid)
	}
	return o, nil
}

// try makes one attempt; a caller that gives up while the requests are on
// their way gets no lock and leaves none (see internal/attempt).
func (lk *Locker) try(ctx context.Context, key string, ttl time.Duration) (lockswap.Lock, error) {
	return attempt.Run(ctx, func(ctx context.Context) (lockswap.Lock, error) { return lk.tryOnce(ctx, key, ttl) })
}

// tryOnce makes one attempt.
func (lk *Locker) tryOnce(ctx context.Context, key string, ttl time.Duration) (lockswap.Lock, error) {
	l := &lock{lk: lk}
	l.keys[0] = lk.opts.Prefix + key
	l.key = l.keys[0]
	token := lockstate.NewToken()
	l.args[0], l.args[1] = token, ttl.Milliseconds()

	c := lk.fan.get()
	defer lk.fan.put(c)
	c.op, c.keys, c.key, c.args, c.ttl = opAcquire, l.keys[:], l.key, l.args[:], ttl
	start := time.Now()
	lk.fan.run(ctx, c, start.Add(lk.instanceTimeout(ttl)))
	return lk.settle(ctx, key, l, c, start, ttl)
}

// settle decides an acquisition from its call's answers: the lock l when
// a majority set the key and validity remains, otherwise the error, after
// undoing the SET on every instance where it succeeded or may have.
func (lk *Locker) settle(ctx context.Context, key string, l *lock, c *call, start time.Time, ttl time.Duration) (lockswap.Lock, error) {
	elapsed := time.Since(start)
	token := l.args[0].(string)
	var votes, held, quarantined, answered int
	for i := range c.res {
		r := &c.res[i]
		switch {
		case r.err != nil:
		case r.quarantined:
			answered++
			quarantined++
		case r.n == 1:
			answered++
			votes++
		default:
			answered++
			held++
		}
	}
	validity := ttl - elapsed - lk.drift(ttl)
	if votes >= lk.quorum && validity > 0 {
		l.Init(key, token, 0, false, start.Add(validity))
		l.acquired = start
		return l, nil
	}
	// Undo: every instance where the SET succeeded or may have.
	var undo uint64
	for i := range c.res {
		if r := &c.res[i]; r.err != nil || r.n == 1 {
			undo |= 1 << i
		}
	}
	if undo != 0 {
		// The undo runs even if ctx ended, bounded by the instance timeout.
		rc := lk.fan.get()
		rc.op, rc.keys, rc.key, rc.args, rc.mask = opRelease, l.keys[:], l.key, l.args[:1], undo
		lk.fan.run(context.WithoutCancel(ctx), rc, time.Now().Add(lk.instanceTimeout(ttl)))
		lk.fan.put(rc)
	}
	switch {
	case votes >= lk.quorum:
		return nil, fmt.Errorf("redlock: acquire %q: a majority said OK but it took %v, leaving no validity of the %v TTL (drift %v): %w",
			key, elapsed.Round(time.Microsecond), ttl, lk.drift(ttl), lockswap.ErrUnavailable)
	case answered-quarantined >= lk.quorum:
		return nil, fmt.Errorf("redlock: acquire %q: %d of %d instances hold it for another owner, %d said OK (need %d): %w",
			key, held, len(lk.inst), votes, lk.quorum, lockswap.ErrHeld)
	default:
		return nil, lk.outage("acquire", key, c, answered-quarantined)
	}
}

// outage builds the error for an operation that no majority answered.
func (lk *Locker) outage(op, key string, c *call, answered int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s %q: %d of %d instances answered (need %d)", op, key, answered, len(lk.inst), lk.quorum)
	sep := ": "
	for i := range c.res {
		r := &c.res[i]
		if c.mask&(1<<i) == 0 {
			continue
		}
		switch {
		case r.err != nil:
			fmt.Fprintf(&b, "%s%s: %v", sep, lk.inst[i].c, r.err)
		case r.quarantined:
			fmt.Fprintf(&b, "%s%s: restarted, votes not counted for %v more", sep, lk.inst[i].c, r.left.Round(time.Millisecond))
		default:
			continue
		}
		sep = "; "
	}
	return &outageError{msg: b.String()}
}

// outageError is the error of an operation that no majority of instances
// answered. It matches lockswap.ErrUnavailable.
type outageError struct{ msg string }

func (e *outageError) Error() string        { return e.msg + ": " + lockswap.ErrUnavailable.Error() }
func (e *outageError) Is(target error) bool { return target == lockswap.ErrUnavailable }

// lock is a held Redlock lock.
type lock struct {
	lockstate.State
	lk         *Locker
	keys       [1]string
	key        any    // keys[0], boxed once
	args       [2]any // token, ttl in ms (the scripts' ARGV)
	acquired   time.Time
	extensions atomic.Int64
	released   atomic.Bool
	mu         sync.Mutex // one Extend or Release at a time
}

func (l *lock) Extend(ctx context.Context, ttl time.Duration) error {
	key := l.Key()
	if err := lockswap.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("redlock: extend %q: %w", key, err)
	}
	if max := l.lk.opts.MaxTTL; max > 0 && ttl > max {
		return fmt.Errorf("redlock: extend %q: ttl %v exceeds MaxTTL %v: %w", key, ttl, max, lockswap.ErrInvalid)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Ended() {
		l.End()
		return fmt.Errorf("redlock: extend %q: validity already over: %w", key, lockswap.ErrLost)
	}
	if m := l.lk.opts.MaxExtensions; m > 0 && l.extensions.Load() >= int64(m) {
		return fmt.Errorf("redlock: extend %q: extended %d times already, the limit (the lock ends at its deadline): %w", key, m, lockswap.ErrLost)
	}
	if m := l.lk.opts.MaxHold; m > 0 && time.Now().Add(ttl).After(l.acquired.Add(m)) {
		return fmt.Errorf("redlock: extend %q: %v more would pass the maximum hold time %v (the lock ends at its deadline): %w", key, ttl, m, lockswap.ErrLost)
	}
	lk := l.lk
	deadline := l.Deadline()
	c := lk.fan.get()
	defer lk.fan.put(c)
	args := [2]any{l.args[0], ttl.Milliseconds()}
	c.op, c.keys, c.key, c.args = opExtend, l.keys[:], l.key, args[:]
	start := time.Now()
	d := start.Add(lk.instanceTimeout(ttl))
	if deadline.Before(d) {
		d = deadline
	}
	lk.fan.run(ctx, c, d)
	var votes, answered int
	for i := range c.res {
		if r := &c.res[i]; r.err == nil {
			answered++
			if r.n == 1 {
				votes++
			}
		}
	}
	now := time.Now()
	switch {
	case votes >= lk.quorum && now.Before(deadline):
		if !l.SetDeadline(start.Add(ttl - lk.drift(ttl))) {
			return fmt.Errorf("redlock: extend %q: lock ended while extending: %w", key, lockswap.ErrLost)
		}
		l.extensions.Add(1)
		return nil
	case votes >= lk.quorum:
		l.End()
		return fmt.Errorf("redlock: extend %q: a majority extended it but only after the validity ended: %w", key, lockswap.ErrLost)
	case answered-votes > len(lk.inst)-lk.quorum:
		// So many instances no longer hold our token that no majority can.
		l.End()
		return fmt.Errorf("redlock: extend %q: %d of %d instances no longer hold our token: %w", key, answered-votes, len(lk.inst), lockswap.ErrLost)
	default:
		return lk.outage("extend", key, c, answered)
	}
}

func (l *lock) Release(ctx context.Context) error {
	if l.released.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released.Load() {
		return nil
	}
	lk, key := l.lk, l.Key()
	rctx, cancel := ctx, context.CancelFunc(nil)
	if ctx.Err() != nil {
		// Release runs even when the caller gave up.
		rctx, cancel = lockswap.CleanupContext(ctx)
		defer cancel()
	}
	c := lk.fan.get()
	defer lk.fan.put(c)
	c.op, c.keys, c.key, c.args = opRelease, l.keys[:], l.key, l.args[:1]
	ttl := time.Duration(l.args[1].(int64)) * time.Millisecond
	// When a goroutine of this Locker waits for the key between attempts,
	// the release takes the key for it in the same request on each
	// instance (redisclient.HandOver: the compare-and-delete, then its
	// SET NX PX), and its attempt is decided like any other (settle).
	var (
		next  *lock
		nextT time.Duration
	)
	t := lk.q.Claim(key, l)
	if t != nil {
		nextT = t.TTL()
		next = &lock{lk: lk, keys: l.keys, key: l.key}
		next.args[0], next.args[1] = lockstate.NewToken(), nextT.Milliseconds()
		c.op, c.args = opHandOver, []any{l.args[0], next.args[0], next.args[1]}
		ttl = max(ttl, nextT)
	}
	start := time.Now()
	lk.fan.run(rctx, c, start.Add(lk.instanceTimeout(ttl)))
	l.End()
	if t != nil {
		t.Deliver(lk.settle(rctx, key, next, c, start, nextT))
	} else {
		// The key is free on the instances that answered (or was lost):
		// the next local waiter tries now.
		lk.q.Released(key, l)
	}
	var removed, answered int
	for i := range c.res {
		if r := &c.res[i]; r.err == nil {
			answered++
			if (c.op == opRelease && r.n == 1) || (c.op == opHandOver && r.released) {
				removed++
			}
		}
	}
	switch {
	case removed >= lk.quorum:
		l.released.Store(true)
		return nil
	case answered-removed > len(lk.inst)-lk.quorum:
		l.released.Store(true)
		return fmt.Errorf("redlock: release %q: %d of %d instances no longer held our token: %w", key, answered-removed, len(lk.inst), lockswap.ErrLost)
	default:
		return lk.outage("release", key, c, answered)
	}
}

// parseEpochReply reads the safe acquire script's array reply {r, epoch,
// sec, usec}: whether the SET was done, the epoch, and the epoch's age on
// the server's clock.
func parseEpochReply(v []any) (set bool, epoch string, age time.Duration, err error) {
	if len(v) != 4 {
		return false, "", 0, fmt.Errorf("unexpected acquire reply %v", v)
	}
	n, _ := v[0].(int64)
	epoch, _ = v[1].(string)
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[3]), 10, 64)
	parts := strings.SplitN(epoch, ".", 3)
	if err1 != nil || err2 != nil || len(parts) != 3 {
		return false, "", 0, fmt.Errorf("unexpected acquire reply %v", v)
	}
	csec, err1 := strconv.ParseInt(parts[0], 10, 64)
	cusec, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false, "", 0, fmt.Errorf("epoch %q under %s is not ours", epoch, EpochKey)
	}
	age = time.Duration((sec-csec)*1e6+(usec-cusec)) * time.Microsecond
	return n == 1, epoch, age, nil
}
