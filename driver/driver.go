// Package driver is the kit that turns a lock service's protocol into a
// [lockswap.Locker], in the shape of go-cloud's portable types and
// database/sql's drivers: a backend implements [Driver] (one attempt,
// extend, release, and optionally [HandOver], [Waiter] for a backend that
// waits for a change instead of polling, and [Bounder]) and [New] builds
// the Locker around it; a driver that finds a held lock lost tells the kit
// with [Claim.Lose]. The kit does, once for every backend:
//
//   - the closed check, and key, TTL and option validation against the
//     backend's declared limits ([Config]);
//   - the local FIFO queue of the Locker's waiting Acquire calls, the
//     hand-over of a released lock to the first of them, the retry policy
//     and [lockswap.WithMaxOutage];
//   - the deadline of every request (the caller's deadline plus
//     [lockswap.DeadlineGrace], at most [lockswap.RequestTimeout] for an
//     attempt or an extension and [lockswap.CleanupTimeout] for a release),
//     and giving back a lock that an attempt took after its caller gave up;
//   - a release whose outcome is unknown: retried within the caller's
//     deadline, then in the background until [lockswap.CleanupTimeout]
//     (Close ends that work, so no goroutine outlives the Locker);
//   - the lock's Deadline and Done bookkeeping, one Extend or Release of a
//     lock at a time;
//   - error wrapping: every error starts with "backend: op key:" and keeps
//     the driver's error, so it matches the sentinel the driver chose;
//   - the events a person must see (a lock lost before its Release, a
//     release that failed or gave up), logged to [Config.Logger] once.
//   - counting the attempts of an Acquire or TryAcquire call whose
//     context carries a counter ([CountAttempts]; what lockswap/otel
//     records): each call of the driver's Acquire or Wait, and a
//     hand-over's attempt for the waiter it was made for.
//
// A driver's methods speak only the protocol. They return errors that match
// one of [lockswap.ErrHeld] (Acquire: another owner holds the key),
// [lockswap.ErrLost] (Extend, Release: the lock is not ours any more),
// [lockswap.ErrInvalid] (retrying cannot help) or [lockswap.ErrUnavailable]
// (an outage); [Config.Uncertain] tells the kit which errors leave the
// outcome of a request unknown (it may have been applied).
//
// A backend package typically embeds the *Locker that New returns in its
// own Locker type, which adds what only that backend has (see singleredis,
// legacysetnx and memlock). docs/backends.md shows a third-party backend
// and its conformance test.
package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/background"
	"github.com/lockswap/lockswap/internal/localq"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// Claim is one lock as its driver sees it: what the kit asks for and what
// the driver keeps to extend and release it.
type Claim[D any] struct {
	// Key is the lock's name as the caller gave it (without any prefix of
	// the backend's).
	Key string
	// Token is the holder's identity: 128 random bits from crypto/rand,
	// hex encoded, made by the kit for each attempt.
	Token string
	// TTL is the lock's time to live: asked for by Acquire, and after an
	// Extend the TTL it asked for.
	TTL time.Duration
	// First is true on the first attempt of an Acquire or TryAcquire call:
	// a driver may spend a request to explain a failure then (whether the
	// key holds something that is not a lock), and not on every retry.
	First bool
	// Data is the driver's own state of the lock (a stored key, a stored
	// value), set by the driver's Acquire and kept by the kit. Extend and
	// Release of one lock never run at once, but a driver whose Extend
	// changes Data while its lock's own accessors read it guards Data itself.
	Data D

	l *lock[D] // the lock this claim was made for
}

// Lose tells the kit that the lock c was made for is lost (a watch saw
// its key deleted, the lease it hangs on expired): its Done closes, Extend
// returns an error matching lockswap.ErrLost without asking the driver,
// and a Release after the Locker's Close returns one matching
// lockswap.ErrClosed (every error matches exactly one sentinel), saying
// the lock was lost. A driver may call it from any
// goroutine, at any time after its Acquire (or Wait) began, on the claim
// it was given or a copy; before the Acquire returns, the lock is returned
// already ended. Release still asks the driver, which must then remove the
// key only if it is still ours.
func (c *Claim[D]) Lose() {
	if c.l != nil {
		old := c.l.flags.Or(flagLost)
		c.l.End()
		if old&flagHeld != 0 {
			c.l.reportLost(ReasonDriverLost)
		}
	}
}

// LoseAtClose is [Claim.Lose] for a lock that the driver's own Close
// ended (etcdlease revokes its leases at Close): the same for the lock,
// but a shutdown, not an event for the Locker's logger.
func (c *Claim[D]) LoseAtClose() {
	if c.l != nil {
		c.l.flags.Or(flagReported)
		c.Lose()
	}
}

// Done returns the Done channel of the lock c was made for, closed at its
// deadline, when it is released and when it is lost: what a driver's own
// work for a held lock (a watch) waits on to end. Nil before the kit
// made the lock.
func (c *Claim[D]) Done() <-chan struct{} {
	if c.l == nil {
		return nil
	}
	return c.l.Done()
}

// Grant is a driver's answer to a successful Acquire or Extend.
type Grant struct {
	// Fence is the lock's fencing number when [Config.Fence] is set.
	Fence uint64
	// Deadline is the time until which exclusion holds. Zero means the
	// default: the time the kit called the driver plus the TTL minus the
	// clock drift allowance (2 ms plus 1% of the TTL).
	Deadline time.Time
}

// Driver is one lock service's protocol. Its methods are called with a
// context whose deadline bounds the request (see the package doc), and
// must return when it ends. They are called concurrently, except that
// Extend and Release of one Claim never run at the same time.
type Driver[D any] interface {
	// Acquire makes one attempt to take c.Key for c.TTL, identified by
	// c.Token. It returns an error matching lockswap.ErrHeld when another
	// owner holds the key, and sets c.Data to what Extend and Release need.
	Acquire(ctx context.Context, c *Claim[D]) (Grant, error)
	// Extend makes c valid for ttl more, counted from now, if it is still
	// ours (lockswap.ErrLost otherwise). Grant.Fence is ignored.
	Extend(ctx context.Context, c *Claim[D], ttl time.Duration) (Grant, error)
	// Release removes c if it is still ours (lockswap.ErrLost otherwise).
	// It must never remove another holder's lock. The kit calls it again
	// while the outcome is uncertain, so it must be idempotent. It is
	// also how the kit undoes an attempt whose outcome is unknown (see
	// [Config.Undo]): then c.Data is what Acquire set before its request.
	Release(ctx context.Context, c *Claim[D]) error
}

// HandOver is implemented by drivers that can release a lock and make the
// attempt of the first local waiter for the same key in one request: a
// hand-over inside one process then costs one round trip, and the waiter
// is woken with its result.
type HandOver[D any] interface {
	// HandOver releases held (as Release) and makes next's attempt (as
	// Acquire) in one request. It returns next's result as soon as it is
	// known, and released, which returns held's (as Release would): the
	// kit hands next its lock before it calls released, so that a release
	// that needs more rounds (redlock) does not keep the waiter waiting.
	// When the request failed, both results are its error. The kit calls
	// released exactly once, while ctx is still valid.
	HandOver(ctx context.Context, held, next *Claim[D]) (g Grant, acquireErr error, released func() error)
}

// Waiter is implemented by drivers that wait for a held lock without
// polling (etcdlease's queue woken by a watch). The kit then calls Wait for
// Acquire instead of Acquire, with no local queue (Config.Queue is
// ignored); TryAcquire still calls Acquire.
type Waiter[D any] interface {
	// Wait makes one attempt to take c.Key for c.TTL, as Acquire does, but
	// while another owner holds the key it waits for a change (not by
	// polling) until it holds the lock or ctx ends. It returns an error
	// matching lockswap.ErrHeld when ctx ended the wait, and one matching
	// lockswap.ErrUnavailable on an outage: the kit then tries again per
	// the retry policy until the backend has answered nothing for the
	// call's lockswap.WithMaxOutage. It tells o each time the backend
	// answers (o.Answered), and bounds its requests by what is left of the
	// outage bound (o.Left), also while it waits. ctx has no request
	// deadline (bound each request) and is cancelled by Close. An attempt
	// that fails or is cancelled leaves nothing behind: the driver gives
	// back what it wrote. The TTL counts from the grant, so Wait sets
	// Grant.Deadline from the request that found the lock ours (a zero
	// Deadline counts from the start of Wait, which is too early after a
	// wait).
	Wait(ctx context.Context, c *Claim[D], o *Outage) (Grant, error)
}

// Outage tracks, for one Acquire through a [Waiter], when the backend
// last answered: the kit ends the wait with lockswap.ErrUnavailable once
// the call's outage bound (lockswap.WithMaxOutage) has passed since. A
// bound of zero or less, or a nil *Outage, is no bound. Its methods are
// safe for concurrent use.
type Outage struct {
	limit  time.Duration
	mu     sync.Mutex
	lastOK time.Time
}

func newOutage(limit time.Duration) *Outage { return &Outage{limit: limit, lastOK: time.Now()} }

// Limit returns the outage bound; zero or less (and a nil *Outage) is no
// bound.
func (o *Outage) Limit() time.Duration {
	if o == nil {
		return 0
	}
	return o.limit
}

// Answered records an answer from the backend.
func (o *Outage) Answered() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.lastOK = time.Now()
	o.mu.Unlock()
}

// Left returns how long the outage may still last before it ends the wait
// (negative once it has), and false when there is no bound.
func (o *Outage) Left() (time.Duration, bool) {
	if o == nil || o.limit <= 0 {
		return 0, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Until(o.lastOK.Add(o.limit)), true
}

// last returns when the backend last answered.
func (o *Outage) last() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lastOK
}

// setLast sets when the backend last answered back to t.
func (o *Outage) setLast(t time.Time) {
	o.mu.Lock()
	o.lastOK = t
	o.mu.Unlock()
}

// Over reports whether the outage has lasted past its bound.
func (o *Outage) Over() bool {
	left, bounded := o.Left()
	return bounded && left <= 0
}

// Bounder is implemented by drivers whose locks also end with something
// else they keep alive (etcdlease's shared leases, renewed in the
// background): a lock's Deadline is then the earlier of the kit's and
// Bound's. A driver that sees the bound pass calls [Claim.Lose].
type Bounder[D any] interface {
	// Bound returns the time until which what c hangs on is known to live
	// (zero: no bound).
	// It is called concurrently with anything, so it must not read what
	// Extend changes without its own guard.
	Bound(c *Claim[D]) time.Time
}

// Config describes a backend to the kit. Name is required, and every
// backend should state its Guarantees.
type Config struct {
	// Name prefixes every error ("singleredis").
	Name string
	// Guarantees is what the backend keeps under which faults.
	Guarantees lockswap.Guarantees
	// TTL is the default TTL of Acquire and TryAcquire (lockswap.WithTTL
	// overrides it). Zero means lockswap.DefaultTTL, brought into
	// [MinTTL, MaxTTL].
	TTL time.Duration
	// MinTTL and MaxTTL are the TTLs the backend accepts; zero means
	// lockswap.MinTTL and lockswap.MaxTTL, which also bound them.
	MinTTL, MaxTTL time.Duration
	// CheckTTL, when set, checks a TTL instead of the range check, so that
	// its error can say why the range is what it is; it must refuse what
	// is outside [MinTTL, MaxTTL], with an error matching
	// lockswap.ErrInvalid.
	CheckTTL func(ttl time.Duration) error
	// Retry is Acquire's default retry policy; nil means lockswap.NoRetry.
	Retry lockswap.RetryStrategy
	// CheckKey, when set, refuses keys beyond the empty one (which the kit
	// refuses): its error should match lockswap.ErrInvalid.
	CheckKey func(key string) error
	// Fence reports that the backend's locks carry fences (Grant.Fence).
	Fence bool
	// Queue lines up the Locker's Acquire calls for one key in arrival
	// order, only the first of them asking the backend (see the package
	// internal/localq): for a backend that polls. A [Waiter] has no use
	// for it: it is ignored then.
	Queue bool
	// Uncertain reports whether a request that failed with err may
	// nevertheless have been applied (a transport error, as opposed to an
	// answer). The kit retries such a release. Nil means never.
	Uncertain func(err error) bool
	// Undo reports whether an attempt whose request failed with err may
	// nevertheless have taken the lock (a reply lost after the request was
	// sent, as opposed to a failed dial that sent nothing): the kit then
	// releases the claim in the background. A backend whose Release could
	// remove another holder's lock after such an attempt (legacysetnx,
	// whose stored values are not unique) leaves it nil.
	Undo func(err error) bool
	// Background, when set, is where the driver runs its own work that
	// goes on after the call that started it returned: the kit runs its
	// own background work there too, so that Close ends all of it at
	// once (see [Background]). One Background serves one Locker.
	Background *Background
	// Closer, when set, is closed by Close, after the background work
	// (the kit's and the driver's) has ended.
	Closer io.Closer
	// Logger, when set, receives the events a person must see: a lock
	// lost before its Release, a release that failed or gave up, a lock
	// that could not be given back (see the Msg constants and
	// docs/observability.md). Records carry the attribute "backend"
	// (Name). Nil writes nothing and costs nothing. Ordinary contention
	// is never logged.
	Logger *slog.Logger
	// LogKeys adds the lock's key (attribute "key") to the records. Keys
	// may name customers or documents, so they are left out by default.
	LogKeys bool
}

// Background runs a driver's work that goes on after the call that
// started it returned (redlock asks again, round after round, the
// instances whose answer to a release is missing): given to [New] in
// [Config.Background], it is the Locker's background group, where the kit
// also runs its own cleanup. Close refuses new work, lets the running work
// (whoever started it) finish for up to half a second
// (internal/background.CloseWait) once, then cancels it and waits for it
// to return, so that no goroutine outlives the Locker. The zero value is
// ready to use; it is safe for concurrent use.
type Background struct{ g background.Group }

// Go runs fn in a new goroutine with a context that ends after
// lockswap.CleanupTimeout, and when Close cancels the Locker's background
// work: fn must then return promptly (bound each request it makes, as
// clients obey deadlines rather than cancellation). It reports false,
// without running fn, once Close has begun.
func (b *Background) Go(fn func(ctx context.Context)) bool {
	return b.g.Go(context.Background(), fn)
}

// Close ends the work as the Locker's Close does. The kit calls it; a
// driver calls it itself only when New failed.
func (b *Background) Close() { b.g.Close() }

// Locker is a lockswap.Locker built by [New] around a [Driver].
type Locker[D any] struct {
	d        Driver[D]
	ho       HandOver[D] // nil when d cannot hand over
	w        Waiter[D]   // nil when d polls
	bd       Bounder[D]  // nil when the kit's deadline is the whole story
	cfg      Config
	min, max time.Duration
	closed   atomic.Bool
	answers  acquire.LastAnswer // when the backend last answered an Acquire (the outage bound)
	q        *localq.Queue      // nil unless cfg.Queue
	// giveBackHanded gives back a lock handed over to a waiter that had
	// gone (localq.Offer.GiveBack), even while Close runs.
	giveBackHanded func(context.Context, lockswap.Lock)
	// bg runs the cleanup that outlives its caller, the kit's and the
	// driver's (Config.Background).
	bg *background.Group
	// stop ends at Close: the waits of a Waiter.
	stop    context.Context
	stopNow context.CancelFunc
	log     logger // Config.Logger; off when nil
}

var _ lockswap.Locker = (*Locker[struct{}])(nil)

// New returns the Locker that runs d as cfg describes. An empty Name, a
// nil driver, or a TTL outside the backend's range fail with an error
// matching lockswap.ErrInvalid.
func New[D any](d Driver[D], cfg Config) (*Locker[D], error) {
	if d == nil {
		return nil, fmt.Errorf("driver: nil driver: %w", lockswap.ErrInvalid)
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("driver: Config.Name is empty: %w", lockswap.ErrInvalid)
	}
	lk := &Locker[D]{d: d, cfg: cfg, min: max(cfg.MinTTL, lockswap.MinTTL), max: lockswap.MaxTTL}
	if cfg.MaxTTL > 0 {
		lk.max = min(cfg.MaxTTL, lockswap.MaxTTL)
	}
	if lk.min > lk.max {
		return nil, fmt.Errorf("%s: TTL range [%v, %v] is empty: %w", cfg.Name, lk.min, lk.max, lockswap.ErrInvalid)
	}
	if lk.cfg.TTL == 0 {
		lk.cfg.TTL = min(max(lockswap.DefaultTTL, lk.min), lk.max)
	}
	if err := lk.checkTTL(lk.cfg.TTL); err != nil {
		return nil, fmt.Errorf("%s: default TTL: %w", cfg.Name, err)
	}
	if lk.cfg.Retry == nil {
		lk.cfg.Retry = lockswap.NoRetry()
	}
	if h, ok := d.(HandOver[D]); ok {
		lk.ho = h
	}
	lk.w, _ = d.(Waiter[D])
	lk.bd, _ = d.(Bounder[D])
	lk.stop, lk.stopNow = context.WithCancel(context.Background())
	lk.log = newLogger(cfg)
	if cfg.Background != nil {
		lk.bg = &cfg.Background.g
	} else {
		lk.bg = new(background.Group)
	}
	if cfg.Queue && lk.w == nil {
		lk.q = localq.New(cfg.Name)
		lk.giveBackHanded = func(ctx context.Context, l lockswap.Lock) {
			if kl, ok := l.(*lock[D]); ok {
				lk.giveBack(ctx, kl)
			}
		}
	}
	return lk, nil
}

// Guarantees returns Config.Guarantees.
func (lk *Locker[D]) Guarantees() lockswap.Guarantees { return lk.cfg.Guarantees }

// TTLRange returns the TTLs Acquire, TryAcquire and Extend accept.
func (lk *Locker[D]) TTLRange() (min, max time.Duration) { return lk.min, lk.max }

// DefaultTTL returns the TTL Acquire and TryAcquire use without
// lockswap.WithTTL.
func (lk *Locker[D]) DefaultTTL() time.Duration { return lk.cfg.TTL }

// Waiting returns how many Acquire calls of this Locker wait for key, the
// one asking the backend included (always 0 without Config.Queue).
func (lk *Locker[D]) Waiting(key string) int {
	if lk.q == nil {
		return 0
	}
	return lk.q.Waiting(key)
}

// Parked returns how many Acquire calls of this Locker wait for key
// between attempts (always 0 without Config.Queue): a release of key
// through this Locker makes the first one's attempt in its own request
// when the driver implements HandOver. Waiting counts also those
// attempting now.
func (lk *Locker[D]) Parked(key string) int {
	if lk.q == nil {
		return 0
	}
	return lk.q.Parked(key)
}

// Close marks the Locker closed: Acquire calls still waiting return an
// error matching lockswap.ErrClosed at once (the request of an attempt in
// flight is cancelled, so a client that watches its context returns then;
// a lock it or a hand-over took is given back), and so do Extend
// and Release of its locks from then on. Held locks are not released;
// they expire after their TTL. Releases still running in the background,
// the kit's and the driver's (Config.Background), get half a second to
// finish, together, then are cancelled; Close waits for them to return,
// then closes Config.Closer.
func (lk *Locker[D]) Close() error {
	if lk.closed.Swap(true) {
		return nil
	}
	lk.stopNow()
	if lk.q != nil {
		lk.q.Close()
	}
	lk.bg.Close()
	if lk.cfg.Closer != nil {
		return lk.cfg.Closer.Close()
	}
	return nil
}

// WaitingKeys returns how many keys have Acquire calls of this Locker
// waiting: 0 once every wait has ended (the queue keeps nothing behind).
func (lk *Locker[D]) WaitingKeys() int {
	if lk.q == nil {
		return 0
	}
	return lk.q.Keys()
}

// Closed reports whether Close was called.
func (lk *Locker[D]) Closed() bool { return lk.closed.Load() }

// fail prefixes err with the backend, the operation and the key.
func (lk *Locker[D]) fail(op, key string, err error) error {
	return fmt.Errorf("%s: %s %s: %w", lk.cfg.Name, op, lockstate.QuoteKey(key), err)
}

func (lk *Locker[D]) checkTTL(ttl time.Duration) error {
	if err := acquire.ValidateTTL(ttl); err != nil {
		return err
	}
	if lk.cfg.CheckTTL != nil {
		return lk.cfg.CheckTTL(ttl)
	}
	if ttl < lk.min || ttl > lk.max {
		return fmt.Errorf("ttl %v is outside this Locker's range [%v, %v]: %w", ttl, lk.min, lk.max, lockswap.ErrInvalid)
	}
	return nil
}

// uncertain reports whether err left a request's outcome unknown, so that
// the kit retries it: not when the driver took the rest on itself
// (GaveUp).
func (lk *Locker[D]) uncertain(err error) bool {
	return err != nil && lk.cfg.Uncertain != nil && lk.cfg.Uncertain(err) && !gaveUp(err)
}

// prepare is the prologue of Acquire and TryAcquire: it refuses a closed
// Locker, a bad key and bad options, changing nothing anywhere.
func (lk *Locker[D]) prepare(key string, opts []lockswap.Option) (lockswap.Options, error) {
	if lk.closed.Load() {
		return lockswap.Options{}, lk.fail("acquire", key, lockswap.ErrClosed)
	}
	if err := acquire.ValidateKey(key); err != nil {
		return lockswap.Options{}, fmt.Errorf("%s: acquire: %w", lk.cfg.Name, err)
	}
	if lk.cfg.CheckKey != nil {
		if err := lk.cfg.CheckKey(key); err != nil {
			return lockswap.Options{}, lk.fail("acquire", key, err)
		}
	}
	o, err := lockswap.Options{TTL: lk.cfg.TTL, Retry: lk.cfg.Retry}.Resolve(opts...)
	if err == nil {
		err = lk.checkTTL(o.TTL)
	}
	if err != nil {
		return o, lk.fail("acquire", key, err)
	}
	return o, nil
}

// Acquire waits for the lock per the retry policy (Config.Retry or
// lockswap.WithRetry) until ctx ends; see lockswap.Locker.
//
// With Config.Queue, the goroutines that wait for the same key through
// this Locker queue in arrival order and only the first of them asks the
// backend; when a lock taken through this Locker is released, the first
// waiter tries at once (or, with a [HandOver] driver, is handed the lock
// in the releasing request). A retry policy that never retries
// (lockswap.NoRetry) makes one attempt without queueing. The order is
// local to this Locker: other processes and Lockers still poll and may
// take the key first.
func (lk *Locker[D]) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	if err := acquire.ValidateContext(ctx); err != nil {
		return nil, lk.fail("acquire", key, err)
	}
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	n := attemptsOf(ctx) // nil: not counted
	if lk.w != nil {
		return lk.wait(ctx, key, o, n)
	}
	first := true
	outage := acquire.NewOutage(o.MaxOutage, &lk.answers)
	try := outage.Wrap(attempt.Timeout, func(ctx context.Context, timeout time.Duration) (lockswap.Lock, error) {
		l, err := lk.try(ctx, key, o.TTL, first, n, timeout)
		first = false
		return l, err
	})
	retry := outage.Strategy(o.Retry)
	if lk.q == nil {
		l, err := acquire.Retry(ctx, retry, try)
		return l, lk.name(key, err)
	}
	offer := localq.Offer{GiveBack: lk.giveBackHanded}
	if lk.ho != nil {
		offer.TTL = o.TTL // a releasing holder may take the lock for us
		if n != nil {
			offer.Delivered = n.add // its attempt counts as ours
		}
	}
	l, err := lk.q.AcquireOffer(ctx, key, retry, offer, try)
	return l, lk.name(key, err)
}

// name prefixes an error of the wait loop that names nothing (a context
// that had ended before the first attempt) with the backend and key.
func (lk *Locker[D]) name(key string, err error) error {
	if err == nil {
		return nil
	}
	return acquire.Name(err, fmt.Sprintf("%s: acquire %s", lk.cfg.Name, lockstate.QuoteKey(key)))
}

// TryAcquire makes one attempt. It does not queue behind the Locker's
// waiting Acquire calls: when the key is free it may take it before them.
func (lk *Locker[D]) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	if err := acquire.ValidateContext(ctx); err != nil {
		return nil, lk.fail("acquire", key, err)
	}
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	l, err := lk.try(ctx, key, o.TTL, true, attemptsOf(ctx), attempt.Timeout)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			// The attempt failed after its caller gave up (its grace ran
			// out): say both.
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
	}
	return l, err
}

// try makes one attempt, counted in n (nil: not counted), whose request
// takes at most timeout; a caller that gives up while the request is on
// its way gets no lock and leaves none (see internal/attempt).
func (lk *Locker[D]) try(ctx context.Context, key string, ttl time.Duration, first bool, n *Attempts, timeout time.Duration) (lockswap.Lock, error) {
	l := lk.newLock(key, ttl, first)
	n.add()
	// Close ends the request at once: a waiter whose attempt hangs on a
	// server that does not answer gets ErrClosed then, not at the
	// request's deadline.
	rctx := attempt.Once(&l.acqReq, ctx, timeout).EndAtClose(lk.stop)
	start := time.Now()
	g, err := lk.d.Acquire(rctx, &l.c)
	rctx.Stop()
	if err != nil {
		if lk.cfg.Undo != nil && lk.cfg.Undo(err) {
			lk.undo(ctx, l.c)
		}
		if lk.closed.Load() && !errors.Is(err, lockswap.ErrClosed) {
			// Close ran meanwhile, and may be what ended the request.
			err = closedBy(err)
		}
		return nil, lk.fail("acquire", key, err)
	}
	l.granted(start, g)
	if ctx.Err() != nil {
		lk.giveBack(ctx, l)
		return nil, lk.fail("acquire", key, givenUp(ctx.Err()))
	}
	if lk.closed.Load() {
		// Close ran meanwhile: nobody could release or extend the lock.
		lk.giveBack(ctx, l)
		return nil, lk.fail("acquire", key, fmt.Errorf("acquired as the Locker was closed; giving it back: %w", lockswap.ErrClosed))
	}
	if err := l.expired(ctx, start); err != nil {
		return nil, lk.fail("acquire", key, err)
	}
	return l, nil
}

// wait is Acquire through a Waiter: one Wait after another while the
// failures are outages and the retry policy and the outage bound allow,
// under ctx also cancelled by Close. A lock taken after the caller gave up
// is given back. Each Wait is an attempt, counted in count (nil: not
// counted).
func (lk *Locker[D]) wait(ctx context.Context, key string, o lockswap.Options, count *Attempts) (lockswap.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, lk.fail("acquire", key, acquire.NotAttempted(err))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(lk.stop, cancel)()
	ob := newOutage(o.MaxOutage)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var prev error
	for n := 1; ; n++ {
		l := lk.newLock(key, o.TTL, n == 1)
		start := time.Now()
		count.add()
		answered := ob.last()
		g, err := lk.w.Wait(wctx, &l.c, ob)
		if err == nil {
			l.granted(start, g)
			if lk.closed.Load() {
				lk.giveBack(ctx, l)
				return nil, lk.fail("acquire", key, fmt.Errorf("acquired as the Locker was closed; giving it back: %w", lockswap.ErrClosed))
			}
			if ctx.Err() != nil {
				lk.giveBack(ctx, l)
				return nil, lk.fail("acquire", key, givenUp(ctx.Err()))
			}
			if err = l.expired(ctx, start); err == nil {
				return l, nil
			}
			// Too slow to leave any validity: a failed attempt, as an
			// outage, and the wait goes on. The grant it got is no answer
			// for the outage bound.
			ob.setLast(answered)
		}
		if lk.closed.Load() && !errors.Is(err, lockswap.ErrClosed) {
			err = closedBy(err)
		}
		if errors.Is(err, lockswap.ErrClosed) {
			return nil, lk.fail("acquire", key, err)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The context ended the wait: the cause is what the wait was
			// for (the holder, ErrHeld) or the attempt before, if this one
			// failed because of the context.
			cause := err
			if !errors.Is(err, lockswap.ErrHeld) && prev != nil {
				cause = prev
			}
			return nil, lk.fail("acquire", key, acquire.WaitError(cause, ctxErr))
		}
		if !errors.Is(err, lockswap.ErrHeld) && !errors.Is(err, lockswap.ErrUnavailable) {
			return nil, lk.fail("acquire", key, err)
		}
		if errors.Is(err, lockswap.ErrUnavailable) && ob.Over() {
			return nil, lk.fail("acquire", key, fmt.Errorf("no answer for %v (see lockswap.WithMaxOutage): %w", ob.limit, err))
		}
		prev = err
		delay, ok := o.Retry.NextDelay(n)
		if !ok {
			return nil, lk.fail("acquire", key, err)
		}
		if left, bounded := ob.Left(); bounded {
			delay = min(delay, max(left, 0))
		}
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
		select {
		case <-wctx.Done():
			if lk.closed.Load() {
				return nil, lk.fail("acquire", key, closedBy(err))
			}
			return nil, lk.fail("acquire", key, acquire.WaitError(err, ctx.Err()))
		case <-timer.C:
		}
	}
}

// undo releases c in the background: a request whose outcome is unknown
// may have taken it. It is done when the release removed the lock, when
// the backend gave another answer than "not ours", or when two "not
// ours" answered one after the other: the lost request may still be
// waiting on the server on its abandoned connection and run after a
// request sent later on another, but a server that reads every connection
// with data before it answers (Redis does) has run it by the second answer.
func (lk *Locker[D]) undo(ctx context.Context, c Claim[D]) {
	work := func(ctx context.Context) {
		answers := 0
		var last error
		background.Retry(ctx, func(ctx context.Context) bool {
			err := lk.d.Release(ctx, &c)
			last = err
			if lk.uncertain(err) {
				return false
			}
			answers++
			return err == nil || !errors.Is(err, lockswap.ErrLost) || answers >= 2
		})
		if answers == 0 && last != nil && lk.log.on() {
			lk.log.warn(MsgUndoGaveUp, c.Key, errAttr(last), slog.Duration("ttl", c.TTL))
		}
	}
	if !lk.bg.Go(ctx, work) {
		// The Locker is closing: one try within the grace.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt.Grace)
		work(rctx)
		cancel()
	}
}

// lock is a held lock: the kit's bookkeeping around the driver's Claim.
type lock[D any] struct {
	lockstate.State
	lk       *Locker[D]
	c        Claim[D] // c.TTL and c.Data change only inside the gate
	released atomic.Bool
	flags    atomic.Uint32 // flagLost (see Claim.Lose), flagHeld, flagReported
	gate     gate          // one Extend or Release at a time
	// The request contexts of the acquire and of the release, kept here
	// to spare an allocation each (attempt.Once).
	acqReq, relReq attempt.Request
}

// Deadline is the kit's deadline, or the driver's Bound when earlier.
func (l *lock[D]) Deadline() time.Time {
	d := l.State.Deadline()
	if l.lk.bd != nil {
		if b := l.lk.bd.Bound(&l.c); !b.IsZero() && b.Before(d) {
			return b
		}
	}
	return d
}

// newLock returns the lock of one attempt, before the driver's request:
// its State is already usable (with a provisional deadline, the TTL from
// now), so that the driver may call Claim.Lose and Claim.Done from then on.
func (lk *Locker[D]) newLock(key string, ttl time.Duration, first bool) *lock[D] {
	l := &lock[D]{lk: lk}
	l.c = Claim[D]{Key: key, Token: lockstate.NewToken(), TTL: ttl, First: first, l: l}
	// Until it is granted the lock has no time limit of its own: a Wait
	// may last longer than the TTL, which counts from the grant.
	l.Init(key, l.c.Token, 0, false, time.Now().Add(notYetGranted))
	return l
}

// notYetGranted is the provisional validity of a lock whose attempt is
// still under way: longer than any wait.
const notYetGranted = 100 * 365 * 24 * time.Hour

// granted sets up l, whose attempt started at start, as held. A lock the
// driver already lost (Claim.Lose) stays ended.
func (l *lock[D]) granted(start time.Time, g Grant) {
	l.SetTTL(l.c.TTL)
	l.SetFence(g.Fence, l.lk.cfg.Fence)
	l.SetDeadline(deadline(start, l.c.TTL, g))
	if l.flags.Or(flagHeld)&flagLost != 0 {
		l.reportLost(ReasonDriverLost)
	}
}

// givenUp is the error of an attempt that took the lock after its caller
// had given up (ctxErr): the lock is given back, and like an attempt too
// slow for its TTL it is a failed attempt, which matches
// lockswap.ErrUnavailable as well as ctxErr.
func givenUp(ctxErr error) error {
	return fmt.Errorf("acquired as the wait was given up; giving it back: %w (%w)", ctxErr, lockswap.ErrUnavailable)
}

// expired gives l back and returns an error matching
// lockswap.ErrUnavailable when l, granted for an attempt that started at
// start, has no validity left: the attempt took as long as the TTL
// allowed. A lock is never returned already past its Deadline. A slow
// attempt is a failed attempt (a slow server, a busy machine, a process
// starved of CPU), not bad input: Acquire tries again, and the time counts
// toward its outage bound (lockswap.WithMaxOutage).
func (l *lock[D]) expired(ctx context.Context, start time.Time) error {
	now := time.Now()
	if now.Before(l.Deadline()) {
		return nil
	}
	l.lk.giveBack(ctx, l)
	return fmt.Errorf("the attempt took %v, which left the ttl %v no validity (a slow server or a busy machine); the lock was given back: %w",
		now.Sub(start).Round(time.Microsecond), l.c.TTL, lockswap.ErrUnavailable)
}

// giveBack releases l, a lock nobody will hold, in the background (inline
// within the grace when the Locker is closing: a lock taken while Close
// runs is given back too).
func (lk *Locker[D]) giveBack(ctx context.Context, l *lock[D]) {
	release := func(ctx context.Context) { _ = l.release(ctx, true) }
	if !lk.bg.Go(ctx, release) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attempt.Grace)
		release(rctx)
		cancel()
	}
}

func deadline(start time.Time, ttl time.Duration, g Grant) time.Time {
	if !g.Deadline.IsZero() {
		return g.Deadline
	}
	return start.Add(ttl - lockstate.Drift(ttl))
}

// Extend asks the driver for ttl more validity; see lockswap.Lock.
func (l *lock[D]) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return errNilLock("extend")
	}
	lk, key := l.lk, l.c.Key
	if err := acquire.ValidateContext(ctx); err != nil {
		return lk.fail("extend", key, err)
	}
	if err := lk.checkTTL(ttl); err != nil {
		return lk.fail("extend", key, err)
	}
	if lk.closed.Load() {
		return lk.fail("extend", key, lockswap.ErrClosed)
	}
	if l.Ended() {
		l.End()
		l.reportExpired()
		return lk.fail("extend", key, fmt.Errorf("validity already over: %w", lockswap.ErrLost))
	}
	// The call's bound is fixed now: waiting for its turn does not extend it.
	limit := attempt.Limit(ctx, attempt.Timeout)
	if !l.gate.enter(ctx, limit) {
		return lk.fail("extend", key, fmt.Errorf("another Extend or Release of this lock was still running at the deadline: %w", lockswap.ErrUnavailable))
	}
	defer l.gate.leave()
	if l.released.Load() || l.Ended() {
		l.End()
		l.reportExpired()
		return lk.fail("extend", key, fmt.Errorf("validity already over: %w", lockswap.ErrLost))
	}
	start := time.Now()
	rctx := attempt.New(ctx, time.Until(limit))
	g, err := lk.d.Extend(rctx, &l.c, ttl)
	rctx.Stop()
	if err != nil {
		if errors.Is(err, lockswap.ErrLost) {
			l.End()
			if lk.log.on() {
				l.reportLost(ReasonExtendRefused, errAttr(err))
			}
		}
		return lk.fail("extend", key, err)
	}
	l.c.TTL = ttl
	l.SetTTL(ttl)
	if !l.SetDeadline(deadline(start, ttl, g)) {
		return lk.fail("extend", key, fmt.Errorf("lock ended while extending: %w", lockswap.ErrLost))
	}
	return nil
}

// Release gives the lock up; see lockswap.Lock.
func (l *lock[D]) Release(ctx context.Context) error {
	if l == nil {
		return errNilLock("release")
	}
	if err := acquire.ValidateContext(ctx); err != nil {
		return l.lk.fail("release", l.c.Key, err) // nothing released: call again with a context
	}
	return l.release(ctx, false)
}

// closedBy is the error of a call that Close ended, err being what the
// call met meanwhile: it matches lockswap.ErrClosed alone (every error
// matches exactly one sentinel), and tells err in its message.
func closedBy(err error) error {
	return fmt.Errorf("%w (%v)", lockswap.ErrClosed, err)
}

// errNilLock is the error of a method called on a nil lock, which names
// no backend and no key.
func errNilLock(op string) error {
	return fmt.Errorf("%s of a nil lock (a Lock from a failed Acquire?): %w", op, lockswap.ErrInvalid)
}

// release is Release; giveBack also releases after Close (a lock nobody
// was handed), and its failures are logged as such.
func (l *lock[D]) release(ctx context.Context, afterClose bool) error {
	if l.released.Load() {
		return nil
	}
	lk, key := l.lk, l.c.Key
	if lk.closed.Load() && !afterClose {
		if l.flags.Load()&flagLost != 0 {
			return lk.fail("release", key, fmt.Errorf("%w, and the lock was lost before", lockswap.ErrClosed))
		}
		return lk.fail("release", key, lockswap.ErrClosed)
	}
	// The call's bound is fixed now: waiting for its turn does not extend it.
	limit := attempt.Limit(ctx, lockswap.CleanupTimeout)
	if !l.gate.enter(ctx, limit) {
		return lk.fail("release", key, fmt.Errorf("an Extend of this lock was still running at the deadline: %w", lockswap.ErrUnavailable))
	}
	defer l.gate.leave()
	if l.released.Load() {
		return nil
	}
	if !afterClose {
		l.reportExpired()
	}
	if lk.ho != nil && lk.q != nil {
		if t := lk.q.ClaimBy(key, l, limit); t != nil {
			return l.handOver(ctx, t, limit)
		}
	}
	// One request answers almost every release; the retries and the
	// background continuation (attempt.Release) are for the rest.
	start := time.Now()
	rctx := attempt.Once(&l.relReq, ctx, time.Until(limit))
	limit, _ = rctx.Deadline()
	err := lk.d.Release(rctx, &l.c)
	rctx.Stop()
	if lk.uncertain(err) {
		c := l.c // the background release keeps its own copy
		var pending bool
		_, err, pending = attempt.Release(ctx, lk.bg, start, limit, struct{}{}, err,
			func(ctx context.Context) (struct{}, error) { return struct{}{}, lk.d.Release(ctx, &c) },
			lk.uncertain, func(_ struct{}, err error) {
				if err == nil || errors.Is(err, lockswap.ErrLost) {
					l.settle(err == nil)
				} else if lk.log.on() {
					l.reportFailed(MsgReleaseGaveUp, afterClose, err)
				}
			})
		if pending {
			// The holder gave the lock up: it no longer excludes anyone
			// it can count on.
			l.End()
			return lk.fail("release", key, fmt.Errorf("outcome unknown at the deadline, still releasing in the background: %w", err))
		}
	}
	if err != nil && lk.closed.Load() && !errors.Is(err, lockswap.ErrClosed) {
		// Close ran meanwhile and may be why (etcdlease revokes its
		// leases): say both.
		err = closedBy(err)
	}
	if err != nil && !errors.Is(err, lockswap.ErrLost) && !gaveUp(err) {
		if lk.log.on() {
			l.reportFailed(MsgReleaseFailed, afterClose, err)
		}
		return lk.fail("release", key, err)
	}
	if err != nil && !gaveUp(err) && lk.log.on() && !afterClose {
		l.reportLost(ReasonNotOurs, errAttr(err))
	}
	l.settle(err == nil || gaveUp(err)) // see GaveUp
	if err != nil {
		return lk.fail("release", key, err)
	}
	return nil
}

// settle ends a lock whose release is decided: released, or lost. Our key
// is free (or was not ours): the next local waiter tries now.
func (l *lock[D]) settle(released bool) {
	if released {
		l.released.Store(true)
	}
	l.End()
	if l.lk.q != nil {
		l.lk.q.Released(l.c.Key, l)
	}
}

// handOver releases l and, in the same request, makes the attempt of the
// first local waiter (claimed by t), within limit.
func (l *lock[D]) handOver(ctx context.Context, t *localq.Ticket, limit time.Time) error {
	lk, key := l.lk, l.c.Key
	next := lk.newLock(key, t.TTL(), false)
	// The claimed waiter waits for this request whatever its own context
	// does, so the request is bounded even when ctx is not.
	hctx := attempt.Once(&l.relReq, ctx, time.Until(limit))
	defer hctx.Stop()
	start := time.Now()
	g, acqErr, released := lk.ho.HandOver(hctx, &l.c, &next.c)
	if acqErr == nil {
		next.granted(start, g)
		if lk.closed.Load() {
			// Close ran meanwhile: the waiter gets ErrClosed, and nobody
			// would release what it was handed.
			lk.giveBack(ctx, next)
			t.Deliver(nil, lk.fail("acquire", key, lockswap.ErrClosed))
		} else if err := next.expired(ctx, start); err != nil {
			t.Deliver(nil, lk.fail("acquire", key, err))
		} else {
			t.Deliver(next, nil)
		}
	} else {
		if lk.cfg.Undo != nil && lk.cfg.Undo(acqErr) {
			lk.undo(ctx, next.c) // the waiter's attempt may have been applied
		}
		t.Deliver(nil, lk.fail("acquire", key, acqErr))
	}
	relErr := released()
	if lk.uncertain(relErr) {
		// Unknown outcome: our release may have been applied or not; it
		// is done (by token) in the background.
		lk.undo(ctx, l.c)
		l.End()
		return lk.fail("release", key, fmt.Errorf("outcome unknown, still releasing in the background: %w", relErr))
	}
	if relErr == nil || errors.Is(relErr, lockswap.ErrLost) || gaveUp(relErr) {
		l.End()
	}
	if relErr != nil && !gaveUp(relErr) && lk.log.on() {
		if errors.Is(relErr, lockswap.ErrLost) {
			l.reportLost(ReasonNotOurs, errAttr(relErr))
		} else {
			l.reportFailed(MsgReleaseFailed, false, relErr)
		}
	}
	if relErr == nil || gaveUp(relErr) {
		l.released.Store(true) // see GaveUp
	}
	if relErr != nil {
		return lk.fail("release", key, relErr)
	}
	return nil
}

// Data returns the driver's Data of l, a lock returned by a [Locker] of
// the same D: what a backend's own accessors read (legacysetnx's stored
// timestamp). ok is false for any other lock.
func Data[D any](l lockswap.Lock) (d D, ok bool) {
	kl, ok := l.(*lock[D])
	if !ok || kl == nil {
		return d, false
	}
	return kl.c.Data, true
}

// gate lets one Extend or Release of a lock run at a time; a caller waits
// for its turn no later than its own limit. It costs no allocation unless
// two calls meet.
type gate struct {
	mu   sync.Mutex
	busy bool
	wake chan struct{} // closed when the current holder leaves; made on demand
}

func (g *gate) enter(ctx context.Context, limit time.Time) bool {
	var t *time.Timer
	done := ctx.Done()
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		g.mu.Lock()
		if !g.busy {
			g.busy = true
			g.mu.Unlock()
			return true
		}
		if g.wake == nil {
			g.wake = make(chan struct{})
		}
		wake := g.wake
		g.mu.Unlock()
		left := time.Until(limit)
		if left <= 0 {
			return false
		}
		if t == nil {
			t = time.NewTimer(left)
		} else {
			t.Reset(left)
		}
		select {
		case <-wake:
		case <-t.C:
			return false
		case <-done:
			// A cancelled caller waits no more than the grace.
			done = nil
			if until := time.Now().Add(attempt.Grace); until.Before(limit) {
				limit = until
			}
		}
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	g.busy = false
	if g.wake != nil {
		close(g.wake)
		g.wake = nil
	}
	g.mu.Unlock()
}
