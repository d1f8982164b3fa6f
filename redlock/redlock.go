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
// counter (K + FenceSuffix, seeded from the server's clock plus 20 ms when
// missing, expiring FenceCounterTTL after its last write),
// and once a majority granted the lock the client writes
// v = max(counters received) + 1 back to the instances that granted it
// with a compare-and-set (applied only where the counter is below v);
// Acquire returns v only when a majority of all the instances applied it
// and validity remains. No two grants get the same fence, and an Acquire
// that starts after another returned gets a larger one. The acquire script
// also compare-and-sets a fence the Locker guesses (the higher of the last
// one it saw for the key plus one and its clock in microseconds plus
// 15 ms): when a
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
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
	// each instance (the key plus FenceSuffix, in the lock key's hash
	// slot, expiring FenceCounterTTL after its last write), in one round
	// trip per acquisition when the Locker's guess of the fence applies
	// and two when it does not (always for a key's first fence): see the
	// package doc and docs/redlock-fencing.md. A counter that is missing
	// (lost in a restart without persistence, deleted, evicted, expired)
	// is seeded again from the server's clock in microseconds plus 20 ms
	// (see Guarantees for the clock assumption). A hand-over to a local
	// waiter (release and the waiter's acquire in one request) guesses as
	// an acquisition does, the releaser's fence plus one at least: one
	// round trip in all when that applies.
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
	// MasterNames, with Fence, name the masters, in the order of the
	// clients, for the check that every client of a prefix uses the same
	// set (MembersKey): give every client the same name for the same
	// master. Empty means each master's address as its client says it
	// (redisclient.Client.Addr). Name them when clients reach the masters
	// by different addresses (DNS names and IPs, proxies), when a client
	// does not say its address, or when a failover moves a master to
	// another address that is still the same master to you.
	MasterNames []string
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
	// (KEYS[2]), seeding it from the server's clock in microseconds plus
	// redisscript.FenceGuessAhead when missing, raises it to the guessed
	// fence ARGV[3] when it is below it and is the counter plus one or at
	// most redisscript.FenceGuessAhead above the server's clock (the fast
	// path's compare-and-set; 0 guesses nothing), writes the counter with
	// the expiry ARGV[4] (ms, FenceCounterTTL) if it changed, sets the key
	// and answers {1, counter as left, 1 if the guess applied else 0};
	// when the key exists it reads nothing and answers 0 (or
	// fenceKeyNotLock for another Redis type). A counter that cannot give a
	// fence is refused before any write, with its redisscript.Fence* code.
	fencedAcquire = redisclient.NewScript(redisscript.FenceCounterLua + fencedAcquireLua)
	// fencedSafeAcquire is fencedAcquire and safeAcquire in one script
	// (Fence with RestartSafety), KEYS = key, EpochKey, counter: it
	// answers as safeAcquire does, with the counter added when it set the
	// key, with the guess ARGV[4] applied and the counter's expiry ARGV[5]
	// set as fencedAcquire does ({1, counter, applied} or {1, epoch, sec,
	// usec, counter, applied}),
	// or a Fence* code with nothing written.
	fencedSafeAcquire = redisclient.NewScript(redisscript.FenceCounterLua + fencedSafeAcquireLua)
	// fenceWriteBack is the second round of a fenced acquisition: on the
	// counter KEYS[1] (seeded as fencedAcquire seeds it when missing), it
	// writes ARGV[1], the new fence, only if the counter is below it, with
	// the expiry ARGV[2] (ms), and answers 1 if it did, 0 if not, or a
	// Fence* code with nothing written. It does not look at the lock key.
	fenceWriteBack = redisclient.NewScript(redisscript.FenceCounterLua + fenceWriteBackLua)
	// fencedHandOver is the hand-over of a fenced Locker: exactly the
	// release script, then fencedAcquire for the waiter (ARGV[2], ARGV[3],
	// its guess ARGV[4], the counter's expiry ARGV[5]), run atomically,
	// KEYS = key, counter. It answers
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
	sg       redisclient.SetGetter      // c, when it runs SET NX PX GET from typed arguments (no boxing, no generic reply); else nil
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
	members   *membership  // Fence: the registration of the masters (nil: addresses unknown)
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
	if err := checkMasterNames(len(clients), opts.MasterNames); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
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
		p.inst[i].sg, _ = c.(redisclient.SetGetter)
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
	var unknownAddrs []string
	if opts.Fence {
		p.hints = newFenceHints()
		p.members, unknownAddrs = newMembership(p.inst, opts.Prefix, opts.MasterNames)
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
	if unknownAddrs != nil {
		p.logUnchecked(unknownAddrs)
	}
	redisclient.LogClientCost(p.log, clients...)
	if p.members != nil {
		ttl := opts.TTL
		if ttl == 0 {
			ttl = min(max(lockswap.DefaultTTL, p.minTTL), p.maxTTL)
		}
		p.members.start(p, ttl)
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

// NoPermitsNote is the note of Guarantees on counting semaphores, which
// redlock refuses for now (lockswap.WithPermits gets lockswap.ErrInvalid).
const NoPermitsNote = "no counting semaphores (WithPermits is refused with ErrInvalid): over N masters each slot would need a majority of votes under the mutex's faults (lagging failover, restart, clock jumps), and no such design has been checked by the model checker yet (docs/semaphores.md)"

// NoReadWriteNote is the note of Guarantees on read-write locks, which
// redlock refuses for now (lockswap.WithRead and lockswap.WithWrite get
// lockswap.ErrInvalid).
const NoReadWriteNote = "no read-write locks (WithRead and WithWrite are refused with ErrInvalid): over N masters readers and writers would each need a majority under the mutex's faults, and no such design has been checked by the model checker yet (docs/rwlocks.md)"

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
		Notes:            []string{failoverNote(n, opts), NoPermitsNote, NoReadWriteNote},
	}
	if opts.Fence {
		g.Notes = append(g.Notes,
			"a fence is installed with a compare-and-set (only where the counter is below it) on a majority before Acquire returns: in the acquire round when the Locker's guess (the higher of the last fence it saw for the key plus one and its clock in µs plus 15 ms; the former alone for 10 s after the masters refused its clock's guess) applies there, else in a write-back round of max(the counters the grants returned) + 1; no two grants of a key get the same fence, and an Acquire that starts after another returned gets a larger one (docs/redlock-fencing.md)",
			"a counter lost in a restart without persistence, deleted, evicted or expired (an hour after the key's last fence) is seeded again from the server's clock in microseconds plus 20 ms, and no fence is ever installed more than 20 ms ahead of the fastest master's clock: fences keep both properties as long as the masters' clocks agree within the time between the key's last fence and the loss (whatever the clients' clocks say), all clients use the same masters (changed one master at a time: a fenced Locker refuses to acquire while a master holds the registration of a set more than one master away from its own, see docs/redlock.md, Changing the masters), and fewer than one fence per microsecond per key is issued",
			"a holder paused past its validity still acts without exclusion, but a resource that checks fences (package fenced) rejects its writes once a later holder has written",
			"the counters need no persistence or appendfsync always: a snapshot (RDB) that restores an older counter after a crash can repeat fences",
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
	if p.members != nil {
		p.members.stop()
	}
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

// withDefaults returns o with the defaults in place of its zero values
// (and no drift for a negative DriftFixed).
func (o Options) withDefaults() Options {
	if o.DriftFactor == 0 {
		o.DriftFactor = DefaultDriftFactor
	}
	if o.DriftFixed == 0 {
		o.DriftFixed = DefaultDriftFixed
	} else if o.DriftFixed < 0 {
		o.DriftFixed = 0
	}
	if o.MaxExtensions == 0 {
		o.MaxExtensions = DefaultMaxExtensions
	}
	if o.Retry == nil {
		o.Retry = DefaultRetry
	}
	return o
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
