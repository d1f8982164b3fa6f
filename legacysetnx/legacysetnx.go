// Package legacysetnx is a lockswap backend that takes part in the legacy
// SETNX/GETSET timestamp lock exactly as old clients write it, so that a
// fleet can move off it gradually (package migrate) instead of being
// rewritten in one go.
//
// The stored value is only the lock's expiry, a Unix timestamp in seconds
// (the documented form) or milliseconds: "current time + TTL + 1". The
// unit must be the one the old clients write and has no default
// (Options.Unit, UnitHelp): read in the wrong unit, a live lock looks
// expired to them. A key
// without a value is free; a key whose timestamp is in the future is held;
// a key whose timestamp is in the past is expired and may be taken over.
// Old clients do that in three steps (SETNX, GET, GETSET, keeping the lock
// only when the value GETSET returned was itself expired); lockswap does the
// same decision in one Lua script, which old clients cannot tell from a
// GETSET that won, and which never overwrites a live lock the way a losing
// GETSET does. Release is one script that deletes the key only if it still
// holds the exact timestamp this holder wrote; Extend is one script that
// compares and sets a new timestamp.
//
// The algorithm depends on synchronised wall clocks and has no owner token
// in the value (see [Guarantees] and docs/legacysetnx.md): a client whose
// clock runs ahead takes over live locks. [Options.ServerTime] makes
// lockswap clients read the time from the Redis server instead, which
// removes the dependency among lockswap clients but not against old
// clients, which keep using their own clocks.
//
// A lock's Token is a random value kept on the client only, for uniqueness
// in the API; what Redis holds is the timestamp (see Timestamp).
package legacysetnx

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/redisclient"
)

// RedisExpiryMargin is added to the remaining validity when
// Options.SetRedisExpiry sets a Redis expiry on a key: Redis drops the key
// this long after its timestamp has passed, never before.
const RedisExpiryMargin = time.Second

// Options configure a Locker. Unit is required; the other fields default
// to no prefix, the local clock, no Redis expiry.
type Options struct {
	// Prefix is prepended to every key in Redis. Old clients that follow
	// the documentation use "lock." (lock "foo" is the key "lock.foo").
	Prefix string
	// Unit is the resolution of the stored timestamps: Seconds or
	// Milliseconds, required (New refuses the zero Unit). It must match what
	// the old clients sharing the keys write (see UnitHelp); a value that is
	// clearly in the other unit is refused.
	Unit Unit
	// Clock is the wall clock used for timestamps and expiry checks; nil
	// means time.Now. Tests inject a skewed clock here. Ignored for expiry
	// decisions when ServerTime is set.
	Clock func() time.Time
	// ServerTime takes the time for timestamps and expiry checks from the
	// Redis server (TIME inside the scripts) instead of Clock, so that
	// lockswap clients do not depend on each other's clocks. The stored
	// values stay plain timestamps that old clients read as before.
	ServerTime bool
	// SetRedisExpiry also sets a Redis expiry (PX) on every key lockswap
	// writes: the remaining validity plus RedisExpiryMargin. It is a safety
	// net against a lock left forever when no client comes to take it over.
	// Old clients ignore it (and their GETSET removes it). Off by default.
	SetRedisExpiry bool
	// Retry is Acquire's default retry policy; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// TTL is the default TTL of Acquire and TryAcquire (lockswap.WithTTL
	// overrides it), within Unit.TTLRange; zero means lockswap.DefaultTTL.
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
}

// DefaultRetry is the retry policy Acquire uses when none is given: a random
// delay of 5 to 25 ms between attempts, until the context ends.
var DefaultRetry = lockswap.JitterRetry(5*time.Millisecond, 25*time.Millisecond)

// The scripts take the current time in ARGV[1] (in units; empty means: read
// TIME on the server), the TTL in units in ARGV[2], the unit ("s" or "ms")
// in ARGV[3] and "1" in ARGV[4] to set a Redis expiry. Replies are arrays
// {status, now, value}.
//
//go:embed prelude.lua
var scriptPrelude string

var (
	// acquireScript: free key or expired timestamp -> write ours (status 1);
	// live timestamp -> held (0); not a timestamp -> -1; wrong unit -> -2.
	acquireScript = redisclient.NewScript(scriptPrelude + acquireLua)
	// extendScript: ARGV[5] is the timestamp we wrote. Still ours and not
	// expired -> write the new one (1); otherwise lost (0).
	extendScript = redisclient.NewScript(scriptPrelude + extendLua)
	// releaseScript deletes the key only if it holds exactly our timestamp.
	releaseScript = redisscript.CompareAndDelete

	//go:embed acquire.lua
	acquireLua string
	//go:embed extend.lua
	extendLua string
)

// Locker is the legacy SETNX/GETSET lockswap.Locker. The kit (package
// driver) does the edges of every call; this package is the protocol.
type Locker struct {
	*driver.Locker[*stamp]
	p *proto
}

var _ lockswap.Locker = (*Locker)(nil)

// New returns a Locker over c. A nil client, a missing Unit (the zero
// value: there is no default, see UnitHelp) or an unknown one, and a TTL
// outside the unit's range (Unit.TTLRange) are rejected with an error
// matching lockswap.ErrInvalid.
func New(c redisclient.Client, opts Options) (*Locker, error) {
	if redisclient.IsNil(c) {
		return nil, fmt.Errorf("legacysetnx: nil redis client: %w", lockswap.ErrInvalid)
	}
	if opts.Unit == 0 {
		return nil, fmt.Errorf("legacysetnx: Options.Unit is required (legacysetnx.Seconds or legacysetnx.Milliseconds): %s: %w", UnitHelp, lockswap.ErrInvalid)
	}
	if !opts.Unit.valid() {
		return nil, fmt.Errorf("legacysetnx: unknown timestamp unit %v (want Seconds or Milliseconds): %w", opts.Unit, lockswap.ErrInvalid)
	}
	if opts.Retry == nil {
		opts.Retry = DefaultRetry
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	p := &proto{c: c, opts: opts}
	minTTL, maxTTL := opts.Unit.TTLRange()
	kit, err := driver.New[*stamp](p, driver.Config{
		Name:       "legacysetnx",
		Guarantees: Guarantees(),
		TTL:        opts.TTL,
		MinTTL:     minTTL,
		MaxTTL:     maxTTL,
		CheckTTL:   opts.Unit.checkTTL,
		Retry:      opts.Retry,
		CheckKey:   redisclient.CheckKey(opts.Prefix),
		Queue:      true,
		Uncertain:  redisclient.Uncertain,
		// No Undo: an acquire whose reply is lost may leave its timestamp
		// until it passes; a compare-and-delete could remove another
		// holder's equal timestamp (see Guarantees).
		Closer:  opts.Closer,
		Logger:  opts.Logger,
		LogKeys: opts.LogKeys,
	})
	if err != nil {
		return nil, err
	}
	if opts.Logger != nil {
		redisclient.LogClientCost(opts.Logger.With(slog.String("backend", "legacysetnx")), c)
	}
	return &Locker{Locker: kit, p: p}, nil
}

// NoPermitsNote is the note of Guarantees on counting semaphores, which
// legacysetnx refuses (lockswap.WithPermits gets lockswap.ErrInvalid).
const NoPermitsNote = "no counting semaphores (WithPermits is refused with ErrInvalid): the legacy pattern stores one timestamp per key, which old clients read as one holder, so a semaphore on their keys would not exclude them"

// NoReadWriteNote is the note of Guarantees on read-write locks, which
// legacysetnx refuses (lockswap.WithRead and lockswap.WithWrite get
// lockswap.ErrInvalid).
const NoReadWriteNote = "no read-write locks (WithRead and WithWrite are refused with ErrInvalid): old clients read the one timestamp per key as one exclusive holder and know no readers, so read holds on their keys would not exclude them"

// Guarantees returns the legacysetnx backend's guarantees. They are the same
// with or without Options.ServerTime, because old clients sharing the keys
// still use their own clocks.
func Guarantees() lockswap.Guarantees {
	// Permits and ReadWrite stay false: see NoPermitsNote and
	// NoReadWriteNote.
	return lockswap.Guarantees{
		Backend:          "legacysetnx",
		Fencing:          false,
		Clock:            lockswap.ClockSynchronized,
		SurvivesFailover: false,
		SurvivesRestart:  false,
		Nodes:            1,
		Tolerates:        0,
		StaleReleaseSafe: true,
		Wait:             lockswap.WaitPoll,
		DeadlineOverrun:  lockswap.DeadlineGrace,
		Notes: []string{
			"the stored value is only a wall-clock expiry timestamp with no owner token: a client whose clock runs ahead takes over locks that are live for the others",
			NoPermitsNote,
			NoReadWriteNote,
			"ServerTime makes lockswap clients use the Redis server's clock, but old clients keep their own, so wall clocks must agree while any old client runs",
			"a holder that pauses past its timestamp is taken over while it still believes it holds the lock, and there is no fencing token to catch it",
			"release deletes only the exact timestamp this holder wrote, but two holders can write the same timestamp (seconds resolution) if a third party deleted the key in between; milliseconds make that far less likely",
			"an old client that loses a GETSET race overwrites the winner's timestamp: the winner keeps the lock, but its Extend and Release then report ErrLost and the key stays until that timestamp passes",
			"a restart without persistence or a failover to an async replica loses the lock",
			"an acquire whose reply is lost may leave its timestamp until it passes: without an owner token it cannot be removed safely",
		},
	}
}

// String names the backend and client, without credentials.
func (lk *Locker) String() string { return "legacysetnx(" + lk.p.c.String() + ")" }

// Unit returns the timestamp unit of the Locker (Options.Unit).
func (lk *Locker) Unit() Unit { return lk.p.opts.Unit }

// Locate returns the Redis server and key under which the lock named key is
// stored (see migrate.Locator).
func (lk *Locker) Locate(key string) (store, storedKey string) {
	return redisclient.Store(lk.p.c), lk.p.opts.Prefix + key
}

// proto is the legacy timestamp protocol: the kit's driver.Driver.
type proto struct {
	c    redisclient.Client
	opts Options
}

// nowArg returns ARGV[1] of the scripts: the client clock in units, or ""
// for the server's TIME.
func (p *proto) nowArg() string {
	if p.opts.ServerTime {
		return ""
	}
	return strconv.FormatInt(p.units(p.opts.Clock()), 10)
}

// units converts t to whole units, truncated (the documentation's
// "current Unix time").
func (p *proto) units(t time.Time) int64 {
	if p.opts.Unit == Milliseconds {
		return t.UnixMilli()
	}
	return t.Unix()
}

// ttlUnits is ttl in whole units, rounded up: the lock's timestamp is
// now + ttlUnits + 1, so it lies at least ttl in the future.
func (p *proto) ttlUnits(ttl time.Duration) int64 {
	u := p.opts.Unit.Duration()
	return int64((ttl + u - 1) / u)
}

func (p *proto) expiryFlag() string {
	if p.opts.SetRedisExpiry {
		return "1"
	}
	return "0"
}

// reply is a decoded script reply {status, now, value}.
type reply struct {
	status int64
	now    int64
	value  string
}

func parseReply(v any) (reply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return reply{}, fmt.Errorf("unexpected script reply %#v", v)
	}
	st, ok1 := arr[0].(int64)
	now, ok2 := arr[1].(int64)
	val, ok3 := arr[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return reply{}, fmt.Errorf("unexpected script reply %#v", v)
	}
	return reply{status: st, now: now, value: val}, nil
}

// notTimestamp is the error for a value under the key that the lock cannot
// interpret (not a number, or a number outside the unit's range). It names
// the key (cut, see lockstate.QuoteKey), says what the value looks like and
// what to fix. Nothing was changed on the server.
func (p *proto) notTimestamp(k, val string) error {
	u := p.opts.Unit
	lo, hi := u.bounds()
	var what, fix string
	switch other, ok := UnitOf(val); {
	case ok && other != u:
		what = fmt.Sprintf("which is not a Unix timestamp in %s but plainly one in %s", u.name(), other.name())
		fix = fmt.Sprintf("if the clients sharing this key write %s, configure unit=%s (Options.Unit = %s); never mix units on one key: a client reading the other unit takes over live locks",
			other.name(), other, unitConst(other))
	case isDecimal(val):
		size := "too large or overflowing"
		if n, err := strconv.ParseFloat(val, 64); err == nil && n < lo {
			size = "too small"
		}
		what = fmt.Sprintf("which is not a Unix timestamp in %s (want %.0f <= n < %.0f): %s", u.name(), lo, hi, size)
		fix = "a client wrote a broken timestamp: find which, and delete the key once no client relies on it"
	case strings.HasPrefix(val, "-") && isDecimal(val[1:]):
		what = fmt.Sprintf("which is not a lock timestamp: it is negative, not a Unix timestamp in %s", u.name())
		fix = "a client wrote a broken timestamp: find which, and delete the key once no client relies on it"
	default:
		what = "which is not a lock timestamp (want the digits of a Unix time)"
		fix = "the key holds other data: use another lock name or prefix, or delete the key if it is stale"
	}
	return fmt.Errorf("key %s holds %s, %s (unit=%s); %s; the value was left untouched: %w",
		lockstate.QuoteKey(k), lockstate.QuoteKey(val), what, u, fix, lockswap.ErrInvalid)
}

// wrongType is the error for a key that holds another Redis type.
func wrongType(k string) error {
	return fmt.Errorf("key %s holds a value of another Redis type (not a string), so it is not a legacy lock; use another lock name or prefix, or delete the key if it is stale; it was left untouched: %w",
		lockstate.QuoteKey(k), lockswap.ErrInvalid)
}

// stamp is a lock's Data: its Redis key and the timestamp it wrote,
// which Extend changes while the lock's holder may read it (Timestamp).
type stamp struct {
	k    string
	unit Unit
	mu   sync.Mutex
	val  string
}

func (s *stamp) value() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.val
}

func (s *stamp) setValue(v string) {
	s.mu.Lock()
	s.val = v
	s.mu.Unlock()
}

// Acquire is one script that takes a free key or an expired timestamp.
func (p *proto) Acquire(ctx context.Context, c *driver.Claim[*stamp]) (driver.Grant, error) {
	k := p.opts.Prefix + c.Key
	start := time.Now()
	v, err := p.c.Run(ctx, acquireScript, []string{k}, p.nowArg(), p.ttlUnits(c.TTL), p.opts.Unit.String(), p.expiryFlag())
	if err != nil {
		if redisclient.IsWrongType(err) {
			return driver.Grant{}, wrongType(k)
		}
		// The script may have run before the error: if so, the timestamp
		// it wrote expires like a crashed holder's (no Undo, see New).
		return driver.Grant{}, redisclient.Classify(p.c, err)
	}
	r, err := parseReply(v)
	if err != nil {
		return driver.Grant{}, redisclient.Classify(p.c, err)
	}
	switch r.status {
	case 1:
	case 0:
		return driver.Grant{}, fmt.Errorf("held until timestamp %s: %w", r.value, lockswap.ErrHeld)
	default:
		return driver.Grant{}, p.notTimestamp(k, r.value)
	}
	c.Data = &stamp{k: k, unit: p.opts.Unit, val: r.value}
	exp, _ := strconv.ParseInt(r.value, 10, 64)
	return driver.Grant{Deadline: p.deadline(start, c.TTL, exp-r.now)}, nil
}

// Extend is one script that writes a new timestamp if the key still holds
// ours and it has not passed.
func (p *proto) Extend(ctx context.Context, c *driver.Claim[*stamp], ttl time.Duration) (driver.Grant, error) {
	start := time.Now()
	old := c.Data.value()
	v, err := p.c.Run(ctx, extendScript, []string{c.Data.k}, p.nowArg(), p.ttlUnits(ttl), p.opts.Unit.String(), p.expiryFlag(), old)
	if err != nil {
		return driver.Grant{}, redisclient.ClassifyHeld(p.c, err)
	}
	r, err := parseReply(v)
	if err != nil {
		return driver.Grant{}, redisclient.Classify(p.c, err)
	}
	if r.status != 1 {
		if r.value == old {
			return driver.Grant{}, fmt.Errorf("timestamp %s already passed: %w", old, lockswap.ErrLost)
		}
		return driver.Grant{}, fmt.Errorf("key holds %s, not our timestamp %s: %w", lockstate.QuoteKey(r.value), old, lockswap.ErrLost)
	}
	c.Data.setValue(r.value)
	exp, _ := strconv.ParseInt(r.value, 10, 64)
	return driver.Grant{Deadline: p.deadline(start, ttl, exp-r.now)}, nil
}

// Release is one compare-and-delete of our exact timestamp.
func (p *proto) Release(ctx context.Context, c *driver.Claim[*stamp]) error {
	val := c.Data.value()
	v, err := p.c.Run(ctx, releaseScript, []string{c.Data.k}, val)
	if err != nil {
		return redisclient.ClassifyHeld(p.c, err)
	}
	if n, _ := v.(int64); n != 1 {
		return fmt.Errorf("the key no longer holds our timestamp %s: %w", val, lockswap.ErrLost)
	}
	return nil
}

// deadline is start + validity - drift, where validity is the TTL, and
// never more than the time until the written timestamp (left units after
// the now the script used): other clients consider the lock expired once
// the timestamp has passed.
func (p *proto) deadline(start time.Time, ttl time.Duration, left int64) time.Time {
	validity := ttl
	if byStamp := time.Duration(left) * p.opts.Unit.Duration(); byStamp < validity {
		validity = byStamp
	}
	return start.Add(validity - lockstate.Drift(ttl))
}

// Peek reads the lock named key without changing it: the expiry its
// timestamp says, and whether that is still in the future (by the server's
// clock with Options.ServerTime, else by Options.Clock). An absent key
// returns the zero time and false. A value that is not a timestamp in the
// configured unit returns an error matching lockswap.ErrInvalid.
func (lk *Locker) Peek(ctx context.Context, key string) (expiry time.Time, live bool, err error) {
	err = lockswap.ErrClosed
	if !lk.Closed() {
		err = acquire.ValidateKey(key)
	}
	if err == nil {
		expiry, live, err = lk.p.peek(ctx, key)
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("legacysetnx: peek %s: %w", lockstate.QuoteKey(key), err)
	}
	return expiry, live, nil
}

func (p *proto) peek(ctx context.Context, key string) (expiry time.Time, live bool, err error) {
	k := p.opts.Prefix + key
	now := p.opts.Clock()
	if p.opts.ServerTime {
		if now, err = p.c.Time(ctx); err != nil {
			return time.Time{}, false, fmt.Errorf("TIME: %w", redisclient.Classify(p.c, err))
		}
	}
	val, found, err := p.c.Get(ctx, k)
	if err != nil {
		if redisclient.IsWrongType(err) {
			return time.Time{}, false, wrongType(k)
		}
		return time.Time{}, false, redisclient.Classify(p.c, err)
	}
	if !found {
		return time.Time{}, false, nil
	}
	n, ok := p.parseStamp(val)
	if !ok {
		return time.Time{}, false, p.notTimestamp(k, val)
	}
	// Live while the timestamp is not less than the current time in whole
	// units (the documented rule).
	live = n >= float64(p.units(now))
	sec, frac := math.Modf(n)
	if p.opts.Unit == Milliseconds {
		return time.UnixMilli(int64(sec)).Add(time.Duration(frac * float64(time.Millisecond))), live, nil
	}
	return time.Unix(int64(sec), int64(frac*1e9)), live, nil
}

// parseStamp parses a stored value as the scripts do: digits with an
// optional decimal fraction, within the configured unit's range. ok is
// false for anything else.
func (p *proto) parseStamp(val string) (n float64, ok bool) {
	if u, ok := UnitOf(val); !ok || u != p.opts.Unit {
		return 0, false
	}
	n, err := strconv.ParseFloat(val, 64)
	return n, err == nil
}

// Timestamp returns what l, a lock of this package, stored in Redis:
// the timestamp as stored (what Release compares) and as a time, its
// expiry (other clients consider the lock expired once their clock has
// passed it). ok is false for a lock of another package.
func Timestamp(l lockswap.Lock) (value string, expiry time.Time, ok bool) {
	s, ok := driver.Data[*stamp](l)
	if !ok || s == nil {
		return "", time.Time{}, false
	}
	value = s.value()
	n, _ := strconv.ParseInt(value, 10, 64)
	if s.unit == Milliseconds {
		return value, time.UnixMilli(n), true
	}
	return value, time.Unix(n, 0), true
}
