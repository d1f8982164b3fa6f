// Package redlock is the lockswap backend for the Redlock algorithm over N
// independent Redis masters (no replication between them).
//
// Acquire reads the monotonic clock, then sends SET key token NX PX ttl to
// every instance at the same time, with one random token for all, each
// request bounded by a per-instance timeout that adapts to the instances'
// round trips within the TTL's budget (timeout.go). The lock is held when
// a majority (N/2+1, plus Options.Failovers: failover.go) answered OK and
// the validity,
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
//
// With Options.Fence, every lock carries a fencing number (Lock.Fence):
// the acquire script on each instance also returns the key's fence
// counter (K + FenceSuffix, seeded from the server's clock when missing),
// and once a majority granted the lock the client writes
// v = max(counters received) + 1 back to the instances that granted it
// with a compare-and-set (applied only where the counter is below v);
// Acquire returns v only when a majority of all the instances applied it
// and validity remains. No two grants get the same fence, and an Acquire
// that starts after another returned gets a larger one. The acquire script
// also compare-and-sets a fence the Locker guesses (the last one it saw for
// the key plus one, else its clock in microseconds plus 5 ms): when a
// majority applied the guess, Acquire returns it in one round trip, as
// unfenced; otherwise the write-back is a second round trip. See
// docs/redlock-fencing.md for the proof.
package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/redisclient"
)

// Defaults.
const (
	// DefaultDriftFactor and DefaultDriftFixed make the clock drift
	// allowance TTL × 0.01 + 2 ms.
	DefaultDriftFactor = lockstate.DriftFactor
	DefaultDriftFixed  = lockstate.DriftFixed
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
	// TTL is the default lock TTL for Acquire and TryAcquire; 0 means
	// lockswap.DefaultTTL. A call's lockswap.WithTTL wins over it.
	TTL time.Duration
	// Retry is Acquire's default retry policy; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// InstanceTimeout bounds each request to one instance, so that a dead
	// or slow instance costs that much and not the TTL. Zero means a
	// timeout per call that adapts to the round trips the instances'
	// answers show (at least InstanceTimeoutFloor, InitialInstanceTimeout
	// before any answer), never longer than leaves a quarter of the TTL as
	// validity: see docs/redlock.md, "Per-instance timeouts". A fixed one
	// must be small against the TTL: the validity is what is left of the
	// TTL after the slowest answer.
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
	// Fence gives every lock a fencing number (Lock.Fence), unique and
	// increasing across the holders of a key, from a counter per key on
	// each instance (the key plus FenceSuffix, without expiry, in the lock
	// key's hash slot), in one round trip per acquisition when the
	// Locker's guess of the fence applies and two when it does not: see
	// the package doc and docs/redlock-fencing.md. A counter that a
	// restart without persistence lost is seeded again from the server's
	// clock in microseconds (see Guarantees for the clock assumption). A
	// hand-over to a local waiter (release and the waiter's acquire in one
	// request) guesses the releaser's fence plus one: one round trip in
	// all when that applies.
	Fence bool
	// MaxTTL is the longest TTL any client uses on these instances,
	// required with RestartSafety. Acquire rejects longer TTLs. At most
	// lockswap.MaxTTL (365 days): the quarantine of a restarted instance
	// lasts MaxTTL plus the drift allowance, never more.
	MaxTTL time.Duration
	// Failovers is how many of a lock's masters may forget it (fail over,
	// restart empty) while it is valid, exclusion kept: acquire and extend
	// need N/2+1+Failovers grants and instances up. See failover.go.
	Failovers int
	// Closers are closed by Locker.Close (clients the Locker owns).
	Closers []io.Closer
	// Logger, when set, receives the events a person must see (a lock
	// lost, a release that failed, the restart-safety
	// quarantine; see docs/observability.md); nil logs
	// nothing.
	Logger *slog.Logger
	// LogKeys adds lock keys to the records (off: keys may be sensitive).
	LogKeys bool
}

var (
	releaseScript  = redisscript.CompareAndDelete
	handOverScript = redisscript.HandOver
	extendScript   = redisscript.CompareAndPExpire
	// safeAcquire is SET NX PX plus the instance's epoch: created from the
	// server clock when missing, returned (with the server time) only when
	// it differs from the one the client knows (ARGV[3]). An epoch that is
	// not one (see validEpoch, which this mirrors) is refused before any
	// write: the script answers {-1, the epoch's first bytes} and changes
	// nothing.
	safeAcquire = redisclient.NewScript(safeAcquireLua)
	// fencedAcquire (Options.Fence) is the acquire of a fenced lock: when
	// the lock key (KEYS[1]) does not exist, it reads the fence counter
	// (KEYS[2]), seeding it from the server's clock in microseconds when
	// missing, raises it to the guessed fence ARGV[3] when it is below it
	// and is the counter plus one or at most redisscript.FenceGuessAhead
	// above the server's clock (the fast path's compare-and-set; 0 guesses
	// nothing), sets the key
	// and answers {1, counter as left, 1 if the guess applied else 0};
	// when the key exists it reads nothing and answers 0 (or
	// fenceKeyNotLock for another Redis type). A counter that cannot give a
	// fence is refused before any write, with its redisscript.Fence* code.
	fencedAcquire = redisclient.NewScript(redisscript.FenceCounterLua + fencedAcquireLua)
	// fencedSafeAcquire is fencedAcquire and safeAcquire in one script
	// (Fence with RestartSafety), KEYS = key, EpochKey, counter: it
	// answers as safeAcquire does, with the counter added when it set the
	// key, with the guess ARGV[4] applied as fencedAcquire applies it
	// ({1, counter, applied} or {1, epoch, sec, usec, counter, applied}),
	// or a Fence* code with nothing written.
	fencedSafeAcquire = redisclient.NewScript(redisscript.FenceCounterLua + fencedSafeAcquireLua)
	// fenceWriteBack is the second round of a fenced acquisition: on the
	// counter KEYS[1] (seeded from the server's clock when missing), it
	// writes ARGV[1], the new fence, only if the counter is below it, and
	// answers 1 if it did, 0 if not, or a Fence* code with nothing
	// written. It does not look at the lock key.
	fenceWriteBack = redisclient.NewScript(redisscript.FenceCounterLua + fenceWriteBackLua)
	// fencedHandOver is the hand-over of a fenced Locker: exactly the
	// release script, then fencedAcquire for the waiter (ARGV[2], ARGV[3],
	// its guess ARGV[4]), run atomically, KEYS = key, counter. It answers
	// {released, 1, counter, applied} when it set the key for the waiter,
	// {released, 0} when the key is held, or {released, code} for a
	// counter that cannot give a fence (nothing written but the release).
	fencedHandOver = redisclient.NewScript(redisscript.FenceCounterLua + fencedHandOverLua)

	//go:embed safe_acquire.lua
	safeAcquireLua string
	//go:embed fenced_acquire.lua
	fencedAcquireLua string
	//go:embed fenced_safe_acquire.lua
	fencedSafeAcquireLua string
	//go:embed fence_write_back.lua
	fenceWriteBackLua string
	//go:embed fenced_hand_over.lua
	fencedHandOverLua string
)

// FenceSuffix is appended to a lock's key for its fence counter on each
// instance (Options.Fence), as singleredis does: see FenceKey.
const FenceSuffix = ":fence"

// FenceKey returns the key of the fence counter for the Redis key k, in
// the same Redis Cluster hash slot as k: "{k}:fence", or "k:fence" when k
// has a hash tag of its own (see redisclient.SlotKey). It is the key
// singleredis uses.
func FenceKey(k string) string { return redisclient.SlotKey(k, FenceSuffix) }

// fenceKeyNotLock is fencedAcquire's answer when the lock key holds another
// Redis type (nothing was written).
const fenceKeyNotLock = -4

// instance is one master and what the Locker knows of it.
type instance struct {
	c        redisclient.Client
	epoch    atomic.Pointer[epochState] // RestartSafety only
	suspect  atomic.Bool                // pipelined path: not answered yet or last request failed: use a worker
	plainSet atomic.Bool                // refused SET NX PX GET (Redis before 7.0): acquire with SET NX PX
	logged   atomic.Pointer[epochState] // RestartSafety with a Logger: the quarantine last logged
}

// epochState is the last epoch seen on an instance and until when its votes
// do not count.
type epochState struct {
	value string
	until time.Time
	ahead time.Duration // how far the epoch was ahead of its server's clock (0: not)
}

// Locker is the Redlock lockswap.Locker. The kit (package driver) does
// the edges of every call (validation, the local queue, retries, request
// deadlines, the lock's bookkeeping, error prefixes); this package is the
// protocol: the fan-out to the instances, the quorum, the validity, the
// epochs of RestartSafety, the undo of a partial quorum and the pipelined
// hand-over.
//
// An attempt that fails because of something retrying cannot fix (a value
// of another Redis type under the key, an epoch key that is not one, an
// error reply such as NOAUTH, NOPERM or an unknown command) on so many
// instances that no majority is possible fails with an error matching
// lockswap.ErrInvalid that says what to fix, and Acquire stops at once.
//
// TTLRange is what a Redlock lock can use: from the smallest TTL that
// keeps at least a quarter of itself as validity in the worst case an
// acquire accepts, to lockswap.MaxTTL or Options.MaxTTL.
type Locker struct {
	*driver.Locker[*rlock]
	p *proto
}

var _ lockswap.Locker = (*Locker)(nil)

// proto is the Redlock protocol over the instances: the driver.Driver
// and, without RestartSafety, the driver.HandOver of the kit.
type proto struct {
	inst   []instance
	split  []redisclient.Splitter // every client's, or nil: pipelined fan-out
	quorum int
	opts   Options
	fan    *fanout

	minTTL, maxTTL time.Duration // the kit's TTL range

	// bg runs the releases that go on, instance by instance, after their
	// caller returned (see goRelease): the kit's background group
	// (driver.Config.Background), which the kit's Close ends.
	bg        driver.Background
	bgRunning atomic.Int64 // background releases running (tests)
	bgGaveUp  atomic.Int64 // background releases that ended with instances still unknown (tests)
	log       *slog.Logger // Options.Logger with the backend attribute; nil: silent
	logMu     sync.Mutex   // one logQuarantine at a time (see there)
	hints     *fenceHints  // Fence: the fence to guess per key (the fast path)
}

// New returns a Locker over the given independent masters. It rejects, with
// an error matching lockswap.ErrInvalid, an empty list, a nil client, the
// same client twice, a negative drift or timeout, a MaxTTL above
// lockswap.MaxTTL, and RestartSafety without MaxTTL. Any N ≥ 1 is accepted; an even N tolerates no more failures than
// N−1 does, so use an odd N.
//
// Acquire and TryAcquire use Options.TTL without lockswap.WithTTL, or
// lockswap.DefaultTTL brought into TTLRange (Options.MaxTTL when it is
// shorter).
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
				return nil, fmt.Errorf("redlock: redis clients %d and %d are the same client or server (%s); Redlock needs independent masters: %w", j, i, c, lockswap.ErrInvalid)
			}
		}
	}
	switch {
	case math.IsNaN(opts.DriftFactor) || !(opts.DriftFactor >= 0 && opts.DriftFactor < 0.5):
		// Written so that NaN (which fails every comparison) and ±Inf fail.
		return nil, fmt.Errorf("redlock: drift factor %v: want a factor in [0, 0.5) such as 0.01: %w", opts.DriftFactor, lockswap.ErrInvalid)
	case opts.DriftFixed > lockswap.MaxTTL:
		return nil, fmt.Errorf("redlock: fixed drift %v is above the maximum TTL %v: %w", opts.DriftFixed, lockswap.MaxTTL, lockswap.ErrInvalid)
	case opts.InstanceTimeout < 0:
		return nil, fmt.Errorf("redlock: instance timeout %v is negative: %w", opts.InstanceTimeout, lockswap.ErrInvalid)
	case opts.InstanceTimeout > lockswap.MaxTTL:
		return nil, fmt.Errorf("redlock: instance timeout %v is above the maximum TTL %v: %w", opts.InstanceTimeout, lockswap.MaxTTL, lockswap.ErrInvalid)
	case opts.MaxHold < 0:
		return nil, fmt.Errorf("redlock: max hold %v is negative: %w", opts.MaxHold, lockswap.ErrInvalid)
	case opts.MaxTTL < 0:
		return nil, fmt.Errorf("redlock: max TTL %v is negative: %w", opts.MaxTTL, lockswap.ErrInvalid)
	case opts.MaxTTL > lockswap.MaxTTL: // keeps the quarantine's arithmetic in range (epoch.go)
		return nil, fmt.Errorf("redlock: MaxTTL %v is above the limit %v (lockswap.MaxTTL, the longest TTL of any lock): %w", opts.MaxTTL, lockswap.MaxTTL, lockswap.ErrInvalid)
	case opts.RestartSafety && opts.MaxTTL == 0:
		return nil, fmt.Errorf("redlock: RestartSafety needs MaxTTL, the longest TTL any client uses on these masters: %w", lockswap.ErrInvalid)
	}
	if err := checkFailovers(len(clients), opts.Failovers); err != nil {
		return nil, err
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
	p := &proto{inst: make([]instance, len(clients)), quorum: len(clients)/2 + 1 + opts.Failovers, opts: opts}
	if opts.Logger != nil {
		p.log = opts.Logger.With(slog.String("backend", "redlock"))
	}
	if err := p.setTTLRange(); err != nil {
		return nil, err
	}
	if opts.TTL != 0 && (opts.TTL < p.minTTL || opts.TTL > p.maxTTL) {
		return nil, fmt.Errorf("redlock: Options.TTL %v is outside [%v, %v], the TTLs this Locker accepts: %w", opts.TTL, p.minTTL, p.maxTTL, lockswap.ErrInvalid)
	}
	split := make([]redisclient.Splitter, 0, len(clients))
	for i, c := range clients {
		// Many callers' commands to one instance go in batches where the
		// client can (rueidis): the instances share the CPUs with the
		// callers, and fewer, larger writes take 1.5–1.6 times the
		// acquisitions per second at 32 goroutines (docs/benchmarks.md).
		if g, ok := c.(redisclient.Grouper); ok {
			c = g.Grouped()
		}
		p.inst[i].c = c
		if s, ok := c.(redisclient.Splitter); ok {
			split = append(split, s)
		}
	}
	if len(split) == len(clients) {
		p.split = split // else not every client can: fan out on the workers
		// Until an instance has answered, its requests go to the workers,
		// so that the first connections are dialled in parallel.
		for i := range p.inst {
			p.inst[i].suspect.Store(true)
		}
	}
	p.fan = newFanout(p, 2*len(clients))
	if opts.Fence {
		p.hints = newFenceHints()
	}
	var d driver.Driver[*rlock] = p
	if opts.RestartSafety {
		d = safeProto{p} // the restart-safe acquire has no hand-over form
	}
	kit, err := driver.New(d, driver.Config{
		Name:       "redlock",
		Guarantees: GuaranteesOf(len(clients), opts),
		Fence:      opts.Fence,
		TTL:        opts.TTL,
		MinTTL:     p.minTTL,
		MaxTTL:     p.maxTTL,
		CheckTTL:   p.checkTTL,
		Retry:      opts.Retry,
		CheckKey:   redisclient.CheckKey(opts.Prefix),
		Queue:      true,
		Background: &p.bg,
		Closer:     p,
		Logger:     opts.Logger,
		LogKeys:    opts.LogKeys,
	})
	if err != nil {
		p.bg.Close()
		p.fan.close()
		return nil, err
	}
	if (opts.Fence || opts.RestartSafety) && p.log != nil {
		p.bg.Go(p.checkDurability)
	}
	return &Locker{Locker: kit, p: p}, nil
}

// safeProto is proto without the hand-over (RestartSafety): a release
// cannot make the restart-safe acquire for a waiter.
type safeProto struct{ p *proto }

func (s safeProto) Acquire(ctx context.Context, c *driver.Claim[*rlock]) (driver.Grant, error) {
	g, err := s.p.Acquire(ctx, c)
	if s.p.log != nil {
		s.p.logQuarantine()
	}
	return g, err
}

func (s safeProto) Extend(ctx context.Context, c *driver.Claim[*rlock], ttl time.Duration) (driver.Grant, error) {
	return s.p.Extend(ctx, c, ttl)
}

func (s safeProto) Release(ctx context.Context, c *driver.Claim[*rlock]) error {
	return s.p.Release(ctx, c)
}

// sameClient reports whether a and b are the same client, or two clients
// of the same server (redisclient.Client.Addr), whatever their client
// libraries and databases: two databases of one server are not
// independent masters. Clients of unknown address (a redigo pool given
// none) are the same only when they are the same client.
func sameClient(a, b redisclient.Client) bool { return redisclient.SameServer(a, b) }

// Quorum returns the number of instances that must agree: N/2+1, plus
// Options.Failovers (the grants an acquisition or an extension needs).
func (lk *Locker) Quorum() int { return lk.p.quorum }

// Guarantees returns the Redlock backend's guarantees over n masters, with
// or without RestartSafety, without fencing: GuaranteesOf for the others.
func Guarantees(n int, restartSafety bool) lockswap.Guarantees {
	return GuaranteesOf(n, Options{RestartSafety: restartSafety})
}

// GuaranteesOf returns the guarantees of a Locker over n masters with
// opts (RestartSafety, Fence and Failovers change them).
func GuaranteesOf(n int, opts Options) lockswap.Guarantees {
	restartSafety := opts.RestartSafety
	g := lockswap.Guarantees{
		Backend:          "redlock",
		Fencing:          opts.Fence,
		SurvivesFailover: opts.Failovers > 0,
		SurvivesRestart:  restartSafety,
		Clock:            lockswap.ClockBoundedDrift,
		Nodes:            n,
		Tolerates:        max(0, n-(n/2+1+opts.Failovers)),
		StaleReleaseSafe: true,
		Wait:             lockswap.WaitPoll,
		DeadlineOverrun:  lockswap.DeadlineGrace,
		Notes:            []string{failoverNote(n, opts)},
	}
	if opts.Fence {
		g.Notes = append(g.Notes,
			"a fence is installed with a compare-and-set (only where the counter is below it) on a majority before Acquire returns: in the acquire round when the Locker's guess (the last fence it saw for the key plus one, or its clock in µs plus 5 ms for a key it has none for) applies there, else in a write-back round of max(the counters the grants returned) + 1; no two grants of a key get the same fence, and an Acquire that starts after another returned gets a larger one (docs/redlock-fencing.md)",
			"a counter lost in a restart without persistence is seeded again from the server's clock in microseconds: fences keep both properties as long as that clock is then past every fence issued for the key, which holds when the instances' clocks agree within the restart's downtime less 20 ms (a guessed fence may be installed up to 20 ms ahead of the instance's clock, never further) and fewer than one fence per microsecond per key is issued",
			"a holder paused past its validity still acts without exclusion, but a resource that checks fences (package fenced) rejects its writes once a later holder has written",
			"the counters need no persistence or appendfsync always, and noeviction or a volatile-* maxmemory policy: a snapshot (RDB) that restores an older counter after a crash can repeat fences",
		)
	} else {
		g.Notes = append(g.Notes, "no fencing token: a holder paused past its validity acts without exclusion (enable Fence)")
	}
	if restartSafety {
		g.Notes = append(g.Notes, "a restarted instance's votes are ignored for MaxTTL after its restart is noticed")
	} else {
		g.Notes = append(g.Notes, "a restart without persistence of enough masters can let a second client in (enable RestartSafety)")
	}
	return g
}

// Close is called by the kit's Locker.Close, after the background work,
// the kit's and the releases still going on instance by instance (see
// goRelease), which the kit lets run for up to background.CloseWait (half
// a second, once for all of it), then stops and waits for: the workers
// stop; Options.Closers are closed. Close waits for all of it, so that no
// goroutine of the Locker outlives it.
func (p *proto) Close() error {
	p.fan.close()
	var errs []error
	for _, c := range p.opts.Closers {
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
	for i := range lk.p.inst {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(lk.p.inst[i].c.String())
	}
	b.WriteString(")")
	return b.String()
}

func (p *proto) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*p.opts.DriftFactor) + p.opts.DriftFixed
}

// usable reports whether a lock of ttl keeps a meaningful validity in the
// worst case the acquire accepts: an answer that comes at the end of the
// per-instance timeout (checkTimeout: the adaptive one never exceeds
// timeoutBudget), minus the drift allowance, must leave at least a
// quarter of the TTL.
func (p *proto) usable(ttl time.Duration) bool {
	return ttl-p.checkTimeout()-p.drift(ttl) >= ttl/4
}

// setTTLRange computes TTLRange, and fails when no TTL is usable.
func (p *proto) setTTLRange() error {
	p.maxTTL = lockswap.MaxTTL
	if m := p.opts.MaxTTL; m > 0 && m < p.maxTTL {
		p.maxTTL = m
	}
	// The smallest usable TTL in whole milliseconds (the unit of PX):
	// usable is monotonic (the validity grows faster than the timeout and
	// the drift, since DriftFactor < 0.5 and checkTimeout is fixed).
	lo, hi := int64(lockswap.MinTTL/time.Millisecond), int64(lockswap.MaxTTL/time.Millisecond)
	if !p.usable(time.Duration(hi) * time.Millisecond) {
		lo = hi + 1
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if p.usable(time.Duration(mid) * time.Millisecond) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	p.minTTL = time.Duration(lo) * time.Millisecond
	if p.minTTL > p.maxTTL {
		return fmt.Errorf("redlock: no TTL is usable: with a drift of %v×TTL + %v and an instance timeout of %v, a lock needs a TTL of at least %v, and the maximum is %v: %w",
			p.opts.DriftFactor, p.opts.DriftFixed, p.checkTimeout(), p.minTTL, p.maxTTL, lockswap.ErrInvalid)
	}
	return nil
}

// checkTTL refuses a TTL outside the range (the kit's Config.CheckTTL):
// the kit's Locker.TTLRange. The minimum is the smallest TTL (at least
// lockswap.MinTTL) for which a lock keeps at least a quarter of its TTL as
// validity in the worst case an acquire accepts: its answers at the end of
// the per-instance timeout and the drift allowance (TTL × DriftFactor +
// DriftFixed) taken off. The maximum is lockswap.MaxTTL, or
// Options.MaxTTL when smaller. Acquire, TryAcquire and Extend refuse a TTL
// outside the range with an error matching lockswap.ErrInvalid, instead of
// failing for want of validity forever.
func (p *proto) checkTTL(ttl time.Duration) error {
	switch {
	case ttl < p.minTTL:
		return fmt.Errorf("ttl %v is below %v, the smallest this Locker accepts: with a drift of %v×TTL + %v and an instance timeout of %v a shorter lock has little or no validity: %w",
			ttl, p.minTTL, p.opts.DriftFactor, p.opts.DriftFixed, p.checkTimeout(), lockswap.ErrInvalid)
	case ttl > p.maxTTL && p.opts.MaxTTL > 0 && p.maxTTL == p.opts.MaxTTL:
		return fmt.Errorf("ttl %v exceeds MaxTTL %v: %w", ttl, p.opts.MaxTTL, lockswap.ErrInvalid)
	case ttl > p.maxTTL:
		return fmt.Errorf("ttl %v is above the maximum %v: %w", ttl, p.maxTTL, lockswap.ErrInvalid)
	}
	return nil
}

// MinCleanupRound is the least time a release, an undo or an extension
// gives the instances to answer before it asks those that have not
// answered again; the per-instance timeout, when longer, is used instead.
// It is not the acquire's per-instance timeout: nothing is lost by waiting
// for these answers, and an answer read too late under load costs a
// request more.
const MinCleanupRound = 250 * time.Millisecond

// cleanupRound bounds one round of a release, an undo or an extension.
func (p *proto) cleanupRound(ttl time.Duration) time.Duration {
	return max(MinCleanupRound, p.instanceTimeout(ttl))
}

// Retry delays between rounds of a release or an extension, doubling.
const (
	roundBackoffMin = 5 * time.Millisecond
	roundBackoffMax = 100 * time.Millisecond
)

// goRelease goes on, on a goroutine of the Locker's background group,
// with the compare-and-delete of token under key on the instances in
// pending, until each has answered, until passes, or Close stops it. It
// reports false, doing nothing, when the Locker is closed.
func (p *proto) goRelease(keys [1]string, key, token any, pending uint64, until time.Time, ttl time.Duration) bool {
	p.bgRunning.Add(1)
	started := p.bg.Go(func(ctx context.Context) {
		defer p.bgRunning.Add(-1)
		// A request whose answer was not read may still be waiting on the
		// server, on its discarded connection: give it a moment to run
		// first, so that this one, on another connection, comes after it.
		sleepUntil(ctx, time.Now().Add(roundBackoffMin))
		t := tally{pending: pending}
		args := [1]any{token}
		p.rounds(ctx, opRelease, keys[:], key, args[:], &t, until, ttl, nil)
		if t.pending != 0 {
			p.bgGaveUp.Add(1)
			if p.log != nil {
				p.logReleaseGaveUp(keys[0], t.pending, ttl)
			}
		}
	})
	if !started {
		p.bgRunning.Add(-1)
		p.bgGaveUp.Add(1)
	}
	return started
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// rounds asks again, round after round, the instances in t.pending (whose
// last outcome is unknown) until none is left, decided(t) reports that
// the outcome is settled, ctx ends or until passes. The first round gives
// the instances cleanupRound(ttl), each next one twice as long. A retried compare-and-delete that finds no
// key of ours counts as a removal: the request whose answer was lost may
// have removed it.
//
// Without decided (a background release), an instance is done only when
// it answered that it deleted our key, or answered twice, one request
// after the other: a SET whose answer was lost may still be waiting on
// the server, on its discarded connection, and run after a request sent
// later on another connection. The server reads every connection with
// data before it answers the first request, so the second request runs
// after the lost one.
func (p *proto) rounds(ctx context.Context, op opKind, keys []string, key any, args []any, t *tally, until time.Time, ttl time.Duration, decided func(*tally) bool) {
	backoff, round := roundBackoffMin, p.cleanupRound(ttl)
	for t.pending != 0 && (decided == nil || !decided(t)) {
		end := until
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			return
		}
		c := p.fan.get()
		c.op, c.keys, c.key, c.args, c.mask = op, keys, key, args, t.pending
		if op == opExtend {
			c.ttl = ttl
		}
		p.fan.run(ctx, c, earliest(now.Add(round), end))
		// An instance slower than a round would never answer in time: its
		// request goes with the connection a late answer discards.
		round *= 2
		asked := c.mask
		t.add(c, true)
		p.fan.put(c)
		if decided == nil {
			// Answered once without deleting anything: ask once more.
			again := asked &^ t.pending &^ t.perm &^ t.del &^ t.once
			t.once |= again
			t.pending |= again
		}
		if t.pending == 0 || (decided != nil && decided(t)) {
			return
		}
		sleepUntil(ctx, earliest(time.Now().Add(backoff), end))
		backoff = min(2*backoff, roundBackoffMax)
	}
}

// tally is what a release or an extension learned from each instance, as
// masks of instances.
type tally struct {
	yes     uint64  // removed (extended)
	no      uint64  // answered that our token was not there
	perm    uint64  // failed with an error retrying cannot fix
	pending uint64  // outcome unknown (an error or no answer in time)
	del     uint64  // answered that it deleted our key (or extended it)
	once    uint64  // background: answered once, without deleting anything
	errs    []error // per instance, the last error of a pending or failed one (nil until there is one)
}

// add records the answers of c's instances. retried: c asked again
// instances whose earlier outcome is unknown.
func (t *tally) add(c *call, retried bool) {
	for i := range c.res {
		b := uint64(1) << i
		if c.mask&b == 0 {
			continue
		}
		r := &c.res[i]
		t.pending &^= b
		switch {
		case c.op == opHandOver && r.released:
			// Our key was deleted, whatever became of the waiter's
			// attempt (a fenced one may have failed on its counter).
			t.yes |= b
			t.del |= b
		case r.err != nil:
			if isPermanent(r.err) {
				t.perm |= b
			} else {
				t.pending |= b
			}
			if t.errs == nil {
				t.errs = make([]error, len(c.res))
			}
			t.errs[i] = r.err
		case c.op != opHandOver && r.n == 1:
			t.yes |= b
			t.del |= b
		case c.op == opRelease && retried:
			t.yes |= b
		default:
			t.no |= b
		}
	}
}

// decided reports whether the outcome of a release or an extension over n
// instances with quorum q no longer depends on the pending instances: a
// quorum said yes, more than n−q said our token is not there, or with the
// failed ones no quorum of yes is possible.
func (t *tally) decided(n, q int) bool {
	yes, no, pending := ones(t.yes), ones(t.no), ones(t.pending)
	return yes >= q || no > n-q || yes+pending < q
}

func ones(m uint64) int { return bits.OnesCount64(m) }

// rlock is a Redlock lock as the protocol keeps it: the Data of its
// driver.Claim. The kit runs one Extend or Release of a lock at a time,
// so its fields need no lock of their own.
type rlock struct {
	keys       [1]string
	key        any                    // keys[0], boxed once
	akeys      [3]string              // Fence: the acquire script's KEYS (key, [EpochKey,] counter)
	nakeys     int                    // Fence: how many of akeys
	fkeys      [1]string              // Fence: the fence counter's key
	fkey       any                    // Fence: fkeys[0], boxed once
	guess      int64                  // Fence: the fence the acquire tries first (fenceHints.guess; 0: none)
	args       [2]any                 // token, ttl in ms (the scripts' ARGV)
	setGet     redisclient.SetGetArgs // the acquire's SET key token NX PX ms GET, from key and args
	acquired   time.Time
	deadline   time.Time // the validity's end, as last granted
	unknown    uint64    // instances whose SET of the acquisition had an unknown outcome
	extensions int
	grants     atomic.Int32 // instances that granted the acquisition or the last extension (Grants)
}

// newRlock makes c's Data for an attempt. The instances keep whole
// milliseconds (PX): c.TTL is truncated to them, so that the validity
// counts from what they keep.
func (p *proto) newRlock(c *driver.Claim[*rlock]) *rlock {
	c.TTL = c.TTL.Truncate(time.Millisecond)
	l := &rlock{}
	l.keys[0] = p.opts.Prefix + c.Key
	l.key = l.keys[0]
	if p.opts.Fence {
		l.fkeys[0] = FenceKey(l.keys[0])
		l.fkey = l.fkeys[0]
		l.akeys[0] = l.keys[0]
		if p.opts.RestartSafety {
			l.akeys[1], l.akeys[2], l.nakeys = EpochKey, l.fkeys[0], 3
		} else {
			l.akeys[1], l.nakeys = l.fkeys[0], 2
		}
	}
	l.args[0], l.args[1] = c.Token, c.TTL.Milliseconds()
	l.setGet.Fill(l.key, l.args[0], l.args[1])
	if p.opts.Fence {
		l.guess = p.hints.guess(l.keys[0])
	}
	c.Data = l
	return l
}

// ttl is the TTL l was acquired with, as the instances keep it.
func (l *rlock) ttl() time.Duration { return time.Duration(l.args[1].(int64)) * time.Millisecond }

// Acquire makes one attempt (driver.Driver): SET NX PX GET (or the
// restart-safe script) on every instance at once, each bounded by the
// per-instance timeout and ctx, then settle. The GET makes an instance
// refuse a key of another Redis type in the same request; where it could
// not (the restart-safe script, a Redis before 7.0) and the key is found
// held on the first attempt (c.First), one TYPE request finds out whether
// what holds it is a lock.
func (p *proto) Acquire(ctx context.Context, cl *driver.Claim[*rlock]) (driver.Grant, error) {
	l := p.newRlock(cl)
	ttl := cl.TTL
	c := p.fan.get()
	defer p.fan.put(c)
	c.op, c.keys, c.key, c.args, c.ttl, c.setGet = opAcquire, l.keys[:], l.key, l.args[:], ttl, &l.setGet
	if p.opts.Fence {
		c.keys, c.fkey, c.guess = l.akeys[:l.nakeys], l.fkey, l.guess
	}
	start := time.Now()
	p.fan.run(ctx, c, start.Add(p.instanceTimeout(ttl)))
	return p.settle(ctx, l, c, start, ttl, cl.First)
}

// settle decides an acquisition from its call's answers: the lock l when
// a majority set the key and validity remains, otherwise the error, after
// undoing the SET on every instance where it succeeded or may have.
//
// An instance that failed with an error retrying cannot fix (or, with
// check, holds a value of another type under the key) counts as failing:
// the attempt fails with ErrInvalid only when such instances leave no
// possible majority. Otherwise it is ErrHeld when the instances that hold
// the key for another owner (with the failing ones) leave no majority, and
// ErrUnavailable when the answers missing decide it.
func (p *proto) settle(ctx context.Context, l *rlock, c *call, start time.Time, ttl time.Duration, check bool) (driver.Grant, error) {
	elapsed := time.Since(start)
	n := len(p.inst)
	var votes, applied, held, quarantined, perm int
	var ok, unknown, heldMask, notLock uint64
	for i := range c.res {
		r, b := &c.res[i], uint64(1)<<i
		switch {
		case r.err != nil && isPermanent(r.err):
			perm++
			if r.err == errKeyNotLock {
				notLock |= b
			}
			if r.n == 1 { // the SET was done all the same (not by the safe acquire, which refuses a bad epoch before it writes)
				ok |= b
			}
		case r.err != nil:
			unknown |= b
		case r.quarantined:
			quarantined++
			if r.n == 1 {
				ok |= b
			}
		case r.n == 1:
			votes++
			ok |= b
			if r.applied {
				applied++
			}
		default:
			held++
			if r.plain || p.opts.RestartSafety { // no GET told the key's type
				heldMask |= b
			}
		}
	}
	validity := ttl - elapsed - p.drift(ttl)
	l.grants.Store(int32(votes))
	if votes >= p.quorum && validity > 0 && p.opts.Fence {
		if applied >= p.quorum {
			// The fast path: a majority granted the lock and applied the
			// guessed fence in the same script, a compare-and-set as the
			// write-back's (docs/redlock-fencing.md).
			l.acquired, l.unknown, l.deadline = start, unknown, start.Add(validity)
			p.hints.saw(l.keys[0], l.guess)
			return driver.Grant{Deadline: l.deadline, Fence: uint64(l.guess)}, nil
		}
		return p.writeBack(ctx, l, c, ok, unknown, start, ttl)
	}
	if votes >= p.quorum && validity > 0 {
		l.acquired, l.unknown, l.deadline = start, unknown, start.Add(validity)
		return driver.Grant{Deadline: l.deadline}, nil
	}
	// The instances that refused the SET NX GET for a key of another type
	// did not say which: ask them, on this error path only, to name it.
	if notLock != 0 {
		for i, err := range p.checkTypes(ctx, l, notLock, ttl) {
			if err != nil {
				c.res[i].err = err
			}
		}
	}
	// What holds the key where it is held: a lock (a string) or not.
	var typeErrs []error
	if check && heldMask != 0 && votes < p.quorum && held+perm > n-p.quorum {
		if typeErrs = p.checkTypes(ctx, l, heldMask, ttl); typeErrs != nil {
			for i, err := range typeErrs {
				if err != nil {
					held--
					perm++
					heldMask &^= 1 << i
				}
			}
		}
	}
	p.undo(ctx, l, ok, unknown, ttl)
	switch {
	case votes >= p.quorum:
		return driver.Grant{}, fmt.Errorf("a majority said OK but it took %v, leaving no validity of the %v TTL (drift %v): %w",
			elapsed.Round(time.Microsecond), ttl, p.drift(ttl), lockswap.ErrUnavailable)
	case perm > n-p.quorum:
		return driver.Grant{}, p.invalid(perm, func(i int) error {
			if typeErrs != nil && typeErrs[i] != nil {
				return typeErrs[i]
			}
			if err := c.res[i].err; err != nil && isPermanent(err) {
				return err
			}
			return nil
		})
	case held+perm > n-p.quorum:
		var b strings.Builder
		fmt.Fprintf(&b, "%d of %d instances hold it for another owner, %d said OK (need %d)", held, n, votes, p.quorum)
		if perm > 0 {
			fmt.Fprintf(&b, "; %d failed with an error retrying cannot fix", perm)
			sep := ": "
			for i := range c.res {
				err := c.res[i].err
				if typeErrs != nil && typeErrs[i] != nil {
					err = typeErrs[i]
				}
				if err != nil && isPermanent(err) {
					fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, err)
					sep = "; "
				}
			}
		}
		return driver.Grant{}, fmt.Errorf("%s: %w", b.String(), lockswap.ErrHeld)
	default:
		return driver.Grant{}, p.outage(c, votes, held, perm)
	}
}

// checkTypes asks the instances in mask, which did not set the key because
// it exists, for the key's type. It returns nil when each holds a string
// (a lock, whoever's) or did not say; otherwise, per instance, the error
// that describes a value that is not a lock. It runs on the caller's time:
// ctx is the attempt's request context (the kit's, see internal/attempt, whose
// deadline already has the grace), and the check ends with it; an
// instance that has not answered by then did not say, and when ctx has
// already ended nothing is asked.
func (p *proto) checkTypes(ctx context.Context, l *rlock, mask uint64, ttl time.Duration) []error {
	if attempt.Ended(ctx) {
		return nil
	}
	c := p.fan.get()
	defer p.fan.put(c)
	c.op, c.keys, c.key, c.mask = opType, l.keys[:], l.key, mask
	until := time.Now().Add(p.cleanupRound(ttl))
	if d, ok := ctx.Deadline(); ok {
		until = earliest(until, d)
	}
	p.fan.run(ctx, c, until)
	var errs []error
	for i := range c.res {
		var nl *notLockError
		if c.mask&(1<<i) != 0 && errors.As(c.res[i].err, &nl) {
			if errs == nil {
				errs = make([]error, len(c.res))
			}
			errs[i] = c.res[i].err
		}
	}
	return errs
}

// undo gives back a failed acquisition of l: the compare-and-delete on the
// instances in ok (which said OK, or may have set it despite an error)
// now, for a round of cleanupRound bounded by ctx, and on those in unknown
// (no answer in time, an error) and those that did not answer that round
// in the background, until lockswap.CleanupTimeout. ctx is the context the
// acquisition ran under: the attempt's request context (internal/attempt:
// the caller's deadline plus the grace already, so none is added here), or
// a release's for a hand-over. When ctx has already ended, nothing is sent
// on the caller's time: it all goes to the background. The acquire's short
// per-instance timeout bounds none of it.
func (p *proto) undo(ctx context.Context, l *rlock, ok, unknown uint64, ttl time.Duration) {
	if ok|unknown == 0 {
		return
	}
	start := time.Now()
	pending := unknown
	if ok != 0 && attempt.Ended(ctx) {
		pending |= ok
	} else if ok != 0 {
		c := p.fan.get()
		c.op, c.keys, c.key, c.args, c.mask = opRelease, l.keys[:], l.key, l.args[:1], ok
		round := start.Add(p.cleanupRound(ttl))
		if d, ok := ctx.Deadline(); ok {
			round = earliest(round, d)
		}
		p.fan.run(ctx, c, round)
		t := tally{pending: ok}
		t.add(c, false)
		p.fan.put(c)
		pending |= t.pending
	}
	if pending != 0 {
		p.goRelease(l.keys, l.key, l.args[0], pending, start.Add(lockswap.CleanupTimeout), ttl)
	}
}

// outage builds the error of an acquisition that the answers missing
// leave undecided: ErrUnavailable.
func (p *proto) outage(c *call, votes, held, perm int) error {
	var b strings.Builder
	n := len(p.inst)
	answered := votes + held + perm
	if answered < p.quorum {
		fmt.Fprintf(&b, "%d of %d instances answered (need %d)", answered, n, p.quorum)
	} else {
		fmt.Fprintf(&b, "%d of %d instances said OK, %d hold it for another owner, %d did not answer or do not count (need %d OKs, or %d held, to decide)",
			votes, n, held, n-answered, p.quorum, n-p.quorum+1)
	}
	sep := ": "
	for i := range c.res {
		r := &c.res[i]
		switch {
		case r.err != nil:
			fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, r.err)
		case r.quarantined:
			fmt.Fprintf(&b, "%s%s: restarted, votes not counted for %v more", sep, p.inst[i].c, r.left.Round(time.Millisecond))
		default:
			continue
		}
		sep = "; "
	}
	return &outageError{msg: b.String()}
}

// undecided builds the error of a release or an extension that the
// answers missing leave undecided: ErrUnavailable. yesWhat says what a
// yes is ("removed our key").
func (p *proto) undecided(yesWhat string, t *tally) error {
	var b strings.Builder
	n := len(p.inst)
	fmt.Fprintf(&b, "outcome unknown: %d of %d instances %s, %d no longer held our token, %d did not answer (need %d to agree)",
		ones(t.yes), n, yesWhat, ones(t.no), ones(t.pending|t.perm), p.quorum)
	sep := ": "
	for i, err := range t.errs {
		if err != nil && (t.pending|t.perm)&(1<<i) != 0 {
			fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, err)
			sep = "; "
		}
	}
	return &outageError{msg: b.String()}
}

// invalid builds the ErrInvalid error of an operation that instances
// failing with errors retrying cannot fix leave without a possible
// majority; errAt gives instance i's error (nil if it did not fail so).
func (p *proto) invalid(failed int, errAt func(i int) error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d instances failed with an error retrying cannot fix, which leaves no possible majority (need %d)",
		failed, len(p.inst), p.quorum)
	sep := ": "
	var reasons []string
	for i := range p.inst {
		err := errAt(i)
		if err == nil {
			continue
		}
		fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, err)
		sep = "; "
		if r := permanentReason(err); r != "" && !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	for _, r := range reasons {
		b.WriteString(" (")
		b.WriteString(r)
		b.WriteString(")")
	}
	return fmt.Errorf("%s: %w", b.String(), lockswap.ErrInvalid)
}

// notLockError is an instance's answer that shows a value that is not a
// lockswap one where the lock needs one: a value of another Redis type
// under the key, or an epoch key that does not hold an epoch. Retrying
// cannot fix it.
type notLockError struct {
	msg, reason string
}

func (e *notLockError) Error() string { return e.msg }

// isPermanent reports whether err is an instance's failure that retrying
// cannot fix.
func isPermanent(err error) bool {
	var nl *notLockError
	return errors.As(err, &nl) || redisclient.IsPermanent(err)
}

// permanentReason says what to fix for an error isPermanent accepts.
func permanentReason(err error) string {
	var nl *notLockError
	if errors.As(err, &nl) {
		return nl.reason
	}
	return redisclient.PermanentReason(err)
}

// outageError is the error of an operation that no majority of instances
// answered. It matches lockswap.ErrUnavailable.
type outageError struct{ msg string }

func (e *outageError) Error() string        { return e.msg + ": " + lockswap.ErrUnavailable.Error() }
func (e *outageError) Is(target error) bool { return target == lockswap.ErrUnavailable }

// Extend asks for ttl more validity, from now (driver.Driver). It sends
// the compare-and-pexpire to every instance and asks again those whose
// outcome is unknown (an error, no answer in time), round after round,
// until a majority extended it or no majority can, within ctx's deadline
// (the kit's request bound), the lock's current deadline and
// lockswap.CleanupTimeout; the acquire's per-instance timeout does not
// bound it. The new deadline counts from before the first request.
// Errors: ErrLost when more than N − quorum instances no longer hold our
// token (or a majority answered too late), or past Options.MaxExtensions
// or Options.MaxHold; ErrInvalid when errors retrying cannot fix leave no
// possible majority; ErrUnavailable when the answers missing leave it
// undecided.
func (p *proto) Extend(ctx context.Context, cl *driver.Claim[*rlock], ttl time.Duration) (driver.Grant, error) {
	l := cl.Data
	ttl = ttl.Truncate(time.Millisecond)
	if m := p.opts.MaxExtensions; m > 0 && l.extensions >= m {
		return driver.Grant{}, fmt.Errorf("extended %d times already, the limit: %w", m, lockswap.ErrLost)
	}
	if m := p.opts.MaxHold; m > 0 && time.Now().Add(ttl).After(l.acquired.Add(m)) {
		return driver.Grant{}, fmt.Errorf("%v more would pass the maximum hold time %v: %w", ttl, m, lockswap.ErrLost)
	}
	deadline := l.deadline
	start := time.Now()
	// An extension answered after the current deadline is no use.
	until := earliest(deadline, start.Add(lockswap.CleanupTimeout))
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	args := [2]any{l.args[0], ttl.Milliseconds()}
	c := p.fan.get()
	c.op, c.keys, c.key, c.args, c.ttl = opExtend, l.keys[:], l.key, args[:], ttl
	p.fan.run(ctx, c, earliest(start.Add(p.cleanupRound(ttl)), until))
	var t tally
	t.add(c, false)
	p.fan.put(c)
	n, q := len(p.inst), p.quorum
	decided := func(t *tally) bool { return t.decided(n, q) }
	p.rounds(ctx, opExtend, l.keys[:], l.key, args[:], &t, until, ttl, decided)
	yes, no, perm := ones(t.yes), ones(t.no), ones(t.perm)
	switch {
	case yes >= q && time.Now().Before(deadline):
		l.deadline = start.Add(ttl - p.drift(ttl))
		l.extensions++
		l.grants.Store(int32(yes))
		return driver.Grant{Deadline: l.deadline}, nil
	case yes >= q:
		return driver.Grant{}, fmt.Errorf("a majority extended it but only after the validity ended: %w", lockswap.ErrLost)
	case no > n-q:
		// So many instances no longer hold our token that no majority can.
		return driver.Grant{}, fmt.Errorf("%d of %d instances no longer hold our token: %w", no, n, lockswap.ErrLost)
	case yes+ones(t.pending) < q:
		return driver.Grant{}, p.invalid(perm, t.permErr)
	default:
		return driver.Grant{}, p.undecided("extended it", &t)
	}
}

// permErr returns instance i's error if it failed with one retrying
// cannot fix.
func (t *tally) permErr(i int) error {
	if t.perm&(1<<i) == 0 || t.errs == nil {
		return nil
	}
	return t.errs[i]
}

// Release removes the lock (driver.Driver): the compare-and-delete on
// every instance. It asks again the instances whose outcome is unknown
// (an error, no answer in time), round after round, until the outcome is
// decided, within ctx's deadline (the kit's request bound: the caller's
// deadline plus lockswap.DeadlineGrace, at most lockswap.CleanupTimeout);
// the acquire's per-instance timeout does not bound it. Whatever is still
// unknown when it returns goes on in the background, until CleanupTimeout
// from the start (Locker.Close lets it run for up to
// background.CloseWait, then stops it and waits for it), so that the key
// is removed from every instance that answers in that time.
//
// It returns nil when a majority removed our key, an error matching
// ErrLost when more than N − quorum instances no longer held our token,
// ErrInvalid when errors retrying cannot fix leave no possible majority,
// and ErrUnavailable when the deadline came with the outcome undecided
// (the release goes on in the background). Every error is wrapped by
// driver.GaveUp: once Release has returned, with or without an error, the
// lock has ended and calling it again does nothing and returns nil.
func (p *proto) Release(ctx context.Context, cl *driver.Claim[*rlock]) error {
	l := cl.Data
	start := time.Now()
	until := p.until(ctx, start)
	ttl := l.ttl()
	c := p.fan.get()
	c.op, c.keys, c.key, c.args = opRelease, l.keys[:], l.key, l.args[:1]
	p.fan.run(ctx, c, earliest(start.Add(p.cleanupRound(ttl)), until))
	var t tally
	t.add(c, false)
	p.fan.put(c)
	return p.released(ctx, l, &t, start, until)
}

// HandOver releases held and, in the same request on each instance, makes
// next's attempt (driver.HandOver: redisscript.HandOver, the
// compare-and-delete, then next's SET NX PX; with Fence, fencedHandOver,
// whose acquire part answers as fencedAcquire does). The round is also
// next's acquisition, bounded by its per-instance timeout so that its
// validity is protected, and decided like any other (settle, which with
// Fence does next's write-back round before next gets its lock); what it
// leaves unknown of held's release is asked again as Release does.
func (p *proto) HandOver(ctx context.Context, hc, nc *driver.Claim[*rlock]) (driver.Grant, error, func() error) {
	l := hc.Data
	next := p.newRlock(nc)
	start := time.Now()
	until := p.until(ctx, start)
	c := p.fan.get()
	c.op, c.keys, c.key, c.args = opHandOver, l.keys[:], l.key, []any{l.args[0], next.args[0], next.args[1]}
	if p.opts.Fence {
		c.keys, c.fkey = next.akeys[:next.nakeys], next.fkey
		c.args = append(c.args, next.guess)
	}
	p.fan.run(ctx, c, earliest(start.Add(p.instanceTimeout(nc.TTL)), until))
	g, acqErr := p.settle(ctx, next, c, start, nc.TTL, false)
	var t tally
	t.add(c, false)
	p.fan.put(c)
	// The waiter has its answer from the first round; the release may
	// need more rounds.
	return g, acqErr, func() error { return p.released(ctx, l, &t, start, until) }
}

// until is the end of a release that starts at start under ctx: ctx's
// deadline (the kit's request bound), at most lockswap.CleanupTimeout.
func (p *proto) until(ctx context.Context, start time.Time) time.Time {
	until := start.Add(lockswap.CleanupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	return until
}

// released decides the release of l, whose first round (started at
// start) is in t: more rounds until, then the background for what is
// still unknown, and the outcome.
func (p *proto) released(ctx context.Context, l *rlock, t *tally, start, until time.Time) error {
	// A release is decided by a plain majority, not the quorum with
	// Options.Failovers: up to Failovers of the lock's masters may have
	// forgotten it (the failover the margin is for) while it is still
	// ours, and that is no lost lock.
	n, q := len(p.inst), len(p.inst)/2+1
	decided := func(t *tally) bool { return t.decided(n, q) }
	ttl := l.ttl()
	p.rounds(ctx, opRelease, l.keys[:], l.key, l.args[:1], t, until, ttl, decided)
	// Go on with what is unknown, and make sure of the instances where
	// the acquisition's SET had an unknown outcome and nothing was
	// deleted: it may still come (see rounds).
	end := start.Add(lockswap.CleanupTimeout)
	if bg := t.pending | (l.unknown &^ t.del &^ t.perm); bg != 0 && time.Now().Before(end) {
		p.goRelease(l.keys, l.key, l.args[0], bg, end, ttl)
	}
	// Whatever the outcome, the lock is given up: what is left is the
	// background's (driver.GaveUp).
	yes, no := ones(t.yes), ones(t.no)
	switch {
	case yes >= q:
		return nil
	case no > n-q:
		return driver.GaveUp(fmt.Errorf("%d of %d instances no longer held our token: %w", no, n, lockswap.ErrLost))
	case yes+ones(t.pending) < q:
		return driver.GaveUp(p.invalid(ones(t.perm), t.permErr))
	default:
		err := p.undecided("removed our key", t)
		return driver.GaveUp(fmt.Errorf("%w (the release goes on in the background, for up to %v from its start)", err, lockswap.CleanupTimeout))
	}
}

// parseEpochReply reads the safe acquire script's array reply: {r, epoch,
// sec, usec} (whether the SET was done, the epoch, and the epoch's age on
// the server's clock, saturated: negative for an epoch in the server's
// future), or {-1, epoch} when the script refused an epoch that is not
// one, without writing anything.
func parseEpochReply(v []any) (set bool, epoch string, age time.Duration, err error) {
	var n int64
	if len(v) > 0 {
		n, _ = v[0].(int64)
	}
	if len(v) == 2 && n == -1 {
		epoch, _ = v[1].(string)
		return false, "", 0, badEpochError(epoch)
	}
	if len(v) != 4 {
		return false, "", 0, fmt.Errorf("unexpected acquire reply %v", v)
	}
	epoch, _ = v[1].(string)
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[3]), 10, 64)
	if err1 != nil || err2 != nil {
		return false, "", 0, fmt.Errorf("unexpected acquire reply %v", v)
	}
	csec, cusec, ok := validEpoch(epoch)
	if !ok {
		// The script refuses such an epoch before it writes; a reply that
		// still carries one says whether the SET was done, to be undone.
		return n == 1, "", 0, badEpochError(epoch)
	}
	age = epochAge(sec, usec, csec, cusec)
	return n == 1, epoch, age, nil
}

// validEpoch parses an epoch, "sec.usec.tag" (the server's TIME when it
// was made, and a tag), and reports false for any other value. It is the
// safe acquire script's check: 1 to 18 ASCII digits in each number, so
// that both fit an int64.
func validEpoch(epoch string) (sec, usec int64, ok bool) {
	parts := strings.SplitN(epoch, ".", 3)
	if len(parts) != 3 {
		return 0, 0, false
	}
	var n [2]int64
	for i, p := range parts[:2] {
		if len(p) == 0 || len(p) > 18 {
			return 0, 0, false
		}
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return 0, 0, false
			}
			n[i] = n[i]*10 + int64(p[j]-'0')
		}
	}
	return n[0], n[1], true
}

// badEpochError is the error of an instance whose epoch key holds
// something that is not an epoch.
func badEpochError(epoch string) error {
	return &notLockError{
		msg:    fmt.Sprintf("epoch %s under %s is not a lockswap epoch", lockstate.QuoteKey(epoch), EpochKey),
		reason: "delete the key " + EpochKey + " on that instance (its votes then wait MaxTTL, as after a restart)",
	}
}
