package lockswap

import (
	"fmt"
	"time"
)

// DefaultTTL is the lock TTL used when no [WithTTL] option is given.
const DefaultTTL = 10 * time.Second

// MinTTL is the smallest TTL any backend accepts: below it the clock drift
// allowance (2 ms plus 1% of the TTL by default) would leave a lock with
// little or no validity. Backends may require more (etcd leases are whole
// seconds, see etcdlease; Redlock with a larger drift allowance).
const MinTTL = 10 * time.Millisecond

// MaxTTL is the largest TTL any backend accepts: a lock that nobody renews
// for a year is a mistake, and larger values overflow the timestamps of
// the legacy lock and the millisecond arithmetic of the servers.
const MaxTTL = 365 * 24 * time.Hour

// Options are the per-call settings of Acquire, TryAcquire and [Do]. Build
// them with [Option] functions; backends read them with [Options.Resolve].
type Options struct {
	// TTL is how long the lock is valid without being extended.
	TTL time.Duration
	// Retry is the retry policy for Acquire; nil means the Locker's default.
	Retry RetryStrategy
	// MaxHold bounds the total time [Do] keeps the lock, extensions
	// included. Zero means no bound beyond the context.
	MaxHold time.Duration
	// RenewEvery is how often [Do] extends the lock; zero means TTL/3.
	RenewEvery time.Duration
	// MaxOutage is how long Acquire keeps waiting while every attempt finds
	// the backend unavailable (see [WithMaxOutage]); negative means until
	// the context ends or the retry policy gives up. Resolve turns zero
	// into [DefaultMaxOutage].
	MaxOutage time.Duration
	// Permits is the limit of the counting semaphore a call takes a permit
	// of ([WithPermits]); zero means the key's mutex.
	Permits int
	// RW is the hold a call takes of the key's read-write lock
	// ([WithRead], [WithWrite]); zero ([NotRW]) means the key's mutex, or
	// its semaphore with Permits.
	RW RWMode

	permitsSet bool   // WithPermits was given (WithPermits(0) is an error)
	rwSet      RWMode // the modes given, or'ed: both at once is an error
}

// Option sets one field of [Options]. Options are values (not closures),
// so passing them costs no allocation.
type Option struct {
	kind  optionKind
	d     time.Duration
	n     int
	retry RetryStrategy
}

type optionKind uint8

const (
	optNone optionKind = iota
	optTTL
	optRetry
	optMaxHold
	optRenewEvery
	optMaxOutage
	optPermits
	optRW
)

func (opt Option) apply(o *Options) {
	switch opt.kind {
	case optTTL:
		o.TTL = opt.d
	case optRetry:
		o.Retry = opt.retry
	case optMaxHold:
		o.MaxHold = opt.d
	case optRenewEvery:
		o.RenewEvery = opt.d
	case optMaxOutage:
		o.MaxOutage = opt.d
	case optPermits:
		o.Permits, o.permitsSet = opt.n, true
	case optRW:
		o.RW = RWMode(opt.n)
		o.rwSet |= o.RW
	}
}

// WithTTL sets the lock's time to live. It must be at least [MinTTL].
func WithTTL(ttl time.Duration) Option { return Option{kind: optTTL, d: ttl} }

// WithRetry sets the retry policy Acquire uses between attempts.
func WithRetry(r RetryStrategy) Option { return Option{kind: optRetry, retry: r} }

// WithMaxHold bounds how long [Do] holds the lock in total: when it is
// reached, renewal stops and fn's context is cancelled before the lock's
// deadline.
func WithMaxHold(d time.Duration) Option { return Option{kind: optMaxHold, d: d} }

// WithRenewEvery sets how often [Do] extends the lock (default TTL/3).
func WithRenewEvery(d time.Duration) Option { return Option{kind: optRenewEvery, d: d} }

// MaxPermits is the largest limit [WithPermits] takes.
const MaxPermits = 1024

// WithPermits makes Acquire and TryAcquire take one of the limit permits
// of key's counting semaphore instead of key's mutex: up to limit holders
// at once, each with a [Lock] of its own (Token, Deadline, Done, Extend,
// Release; [Do] works with it). Every holder of the key must give the same
// limit, from 1 to [MaxPermits]: a call with another limit than the
// permits held, and a mutex and a semaphore on one key, are refused with
// [ErrInvalid] at once, as the configuration errors they are (Acquire
// does not wait for them to pass); once every permit has ended, the next
// holder's limit is the key's. A permit's fence rises per slot: [Slot] says which slot
// it holds, and a resource guarding slot k rejects an older holder of
// slot k (docs/semaphores.md). A backend without semaphores refuses the
// option with [ErrInvalid].
func WithPermits(limit int) Option { return Option{kind: optPermits, n: limit} }

// DefaultMaxOutage is how long Acquire keeps waiting, by default, while
// every attempt finds the backend unavailable (refused connections,
// timeouts, no quorum): after that it returns the last error, which
// matches [ErrUnavailable], even under a context that never ends.
// Contention alone ([ErrHeld]) does not count: Acquire waits for a held key
// until its context ends or the retry policy gives up.
const DefaultMaxOutage = 15 * time.Second

// WithMaxOutage sets how long Acquire keeps waiting through an outage (every
// attempt unavailable) before it returns the error; negative waits until
// the context ends or the retry policy gives up; zero keeps the default,
// [DefaultMaxOutage].
func WithMaxOutage(d time.Duration) Option { return Option{kind: optMaxOutage, d: d} }

// Resolve returns the settings opts make over o, whose zero fields take
// the defaults ([DefaultTTL], [DefaultMaxOutage], [NoRetry]), and checks
// them: the error matches [ErrInvalid] and names the setting at fault. A
// backend resolves a call's options over its own defaults this way; so
// can a wrapper of a Locker that needs to know the TTL a call asks for.
func (o Options) Resolve(opts ...Option) (Options, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxOutage == 0 {
		o.MaxOutage = DefaultMaxOutage
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if err := validateTTL(o.TTL); err != nil {
		return o, err
	}
	if o.MaxHold < 0 {
		return o, fmt.Errorf("max hold %v is negative: %w", o.MaxHold, ErrInvalid)
	}
	if o.RenewEvery < 0 {
		return o, fmt.Errorf("renew interval %v is negative: %w", o.RenewEvery, ErrInvalid)
	}
	if (o.permitsSet || o.Permits != 0) && (o.Permits < 1 || o.Permits > MaxPermits) {
		return o, fmt.Errorf("permits %d: want a limit from 1 to %d: %w", o.Permits, MaxPermits, ErrInvalid)
	}
	if o.rwSet == ReadHold|WriteHold {
		return o, fmt.Errorf("WithRead and WithWrite both given: a hold is one or the other: %w", ErrInvalid)
	}
	if o.RW != NotRW && (o.RW > WriteHold || o.Permits != 0) {
		if o.Permits != 0 {
			return o, fmt.Errorf("%v hold with WithPermits: a hold is of a read-write lock or a permit of a semaphore, not both: %w", o.RW, ErrInvalid)
		}
		return o, fmt.Errorf("read-write mode %d: want ReadHold or WriteHold: %w", o.RW, ErrInvalid)
	}
	if o.Retry == nil {
		o.Retry = NoRetry()
	}
	if o.MaxOutage == 0 {
		o.MaxOutage = DefaultMaxOutage
	}
	return o, nil
}

// validateTTL checks that ttl is within [[MinTTL], [MaxTTL]].
func validateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("ttl %v is not positive: %w", ttl, ErrInvalid)
	}
	if ttl < MinTTL {
		return fmt.Errorf("ttl %v is below the minimum %v: %w", ttl, MinTTL, ErrInvalid)
	}
	if ttl > MaxTTL {
		return fmt.Errorf("ttl %v is above the maximum %v: %w", ttl, MaxTTL, ErrInvalid)
	}
	return nil
}
