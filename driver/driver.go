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
	// Permits is the limit of the counting semaphore this claim is a
	// permit of (lockswap.WithPermits), 0 for the key's mutex. The driver
	// refuses, with lockswap.ErrInvalid and changing nothing, a claim whose
	// limit differs from the permits held, and a mutex and a semaphore on
	// one key.
	Permits int
	// RW is the hold of the key's read-write lock this claim is
	// (lockswap.WithRead, lockswap.WithWrite), lockswap.NotRW for the
	// key's mutex or a permit. The driver refuses, with lockswap.ErrInvalid
	// and changing nothing, a read-write hold on a key held as a mutex or a
	// semaphore, and the other way round.
	RW lockswap.RWMode
	// Writer is set on the attempts of an Acquire of a write hold (zero
	// on TryAcquire and on other holds): see [WriterWait].
	Writer WriterWait
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

// WriterWait is a writer's Acquire waiting for a read-write lock's key.
// When one of its attempts finds the key held, the driver marks the key as
// wanted by writer ID until Until, and refuses new read holds while a
// mark is live, with lockswap.ErrHeld (writer preference); granting
// writer ID its write hold removes its own mark, and so does [Unmarker]
// when the Acquire gives up. A writer that crashes leaves a mark that
// ends at Until.
type WriterWait struct {
	// ID is the same on every attempt of one Acquire call: 128 random
	// bits from crypto/rand, hex encoded. Empty: no mark (TryAcquire).
	ID string
	// Until is when that Acquire's wait ends: its context's deadline, at
	// most one TTL after the attempt.
	Until time.Time
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
	// Fence is the lock's fencing number when [Config.Fence] is set; for
	// a permit, the fence of its slot, which rises per slot.
	Fence uint64
	// Slot is the slot a permit holds, from 0 to Claim.Permits - 1.
	Slot int
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

// Unmarker is implemented by drivers that mark a key for a waiting
// writer (Claim.Writer): when an Acquire of a write hold ends without
// the hold after an attempt of it found the key held (or failed in a way
// that may have reached the server), the kit calls
// Unmark in the background (bounded by lockswap.CleanupTimeout, ended by
// Close), so that the mark keeps readers out no longer than the wait it
// stood for. A mark whose Unmark fails, or whose writer crashed, still
// ends at its Until.
type Unmarker interface {
	// Unmark removes writer w's mark on key, if it is there.
	Unmark(ctx context.Context, key string, w WriterWait) error
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
	// Permits reports that the driver takes permits of counting
	// semaphores (lockswap.WithPermits): its Acquire then reads
	// Claim.Permits and answers Grant.Slot. Without it the kit refuses the
	// option with lockswap.ErrInvalid. Permits do not go through the
	// local queue or a hand-over; they go through a Waiter's Wait only
	// with WaitPermits: otherwise each waiter polls per the retry policy
	// (Config.Retry, NoRetry by default for a Waiter, so give one there).
	Permits bool
	// WaitPermits reports that the driver's Waiter waits for permits too
	// (its Wait reads Claim.Permits): Acquire of a permit then calls Wait,
	// as for the mutex.
	WaitPermits bool
	// ReadWrite reports that the driver takes the holds of read-write
	// locks (lockswap.WithRead, lockswap.WithWrite): its Acquire then
	// reads Claim.RW and Claim.Writer. Without it the kit refuses
	// the options with lockswap.ErrInvalid. Read-write holds go neither
	// through the local queue nor a hand-over; they go through a Waiter's
	// Wait only with WaitRW: otherwise each waiter polls per the retry
	// policy.
	ReadWrite bool
	// WaitRW reports that the driver's Waiter waits for read-write holds
	// too (its Wait reads Claim.RW): Acquire of one then calls Wait, as
	// for the mutex; Claim.Writer is then not set (a Waiter's queue keeps
	// a waiting writer's place).
	WaitRW bool
	// Queue lines up the Locker's Acquire calls for one key in arrival
	// order, only the first of them asking the backend (see the package
	// internal/localq): for a backend that polls. A [Waiter] has no use
	// for it: it is ignored then, except for permits when the Waiter does
	// not wait for them (WaitPermits unset). The permits of a key line up
	// apart from its mutex, and a waiter behind one that took a permit
	// tries at once; read-write holds do not queue.
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
	um       Unmarker    // nil when the driver marks nothing to remove
	cfg      Config
	min, max time.Duration
	closed   atomic.Bool
	answers  acquire.LastAnswer // when the backend last answered an Acquire (the outage bound)
	q        *localq.Queue      // nil unless cfg.Queue
	pq       *localq.Queue      // permits' queue (localq.NewShared); nil unless cfg.Queue and cfg.Permits
	// giveBackHanded gives back a lock handed over to a waiter that had
	// gone (localq.Offer.GiveBack), even while Close runs.
	giveBackHanded func(context.Context, lockswap.Lock)
	// bg runs the cleanup that outlives its caller, the kit's and the
	// driver's (Config.Background).
	bg *background.Group
	// stop ends at Close: the waits of a Waiter.
	stop    context.Context
	stopNow context.CancelFunc
	// deadlines hands out the Done channels of the acquire requests of
	// callers whose contexts cannot be cancelled (attempt.Request.EndAtClose);
	// Close closes them.
	deadlines *attempt.Deadlines
	log       logger // Config.Logger; off when nil
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
	// What the kit lets through decides the declaration.
	lk.cfg.Guarantees.Permits = cfg.Permits
	lk.cfg.Guarantees.ReadWrite = cfg.ReadWrite
	if h, ok := d.(HandOver[D]); ok {
		lk.ho = h
	}
	lk.w, _ = d.(Waiter[D])
	lk.bd, _ = d.(Bounder[D])
	lk.um, _ = d.(Unmarker)
	if cfg.WaitPermits && (!cfg.Permits || lk.w == nil) {
		return nil, fmt.Errorf("%s: Config.WaitPermits needs Config.Permits and a driver that implements Waiter: %w", cfg.Name, lockswap.ErrInvalid)
	}
	if cfg.WaitRW && (!cfg.ReadWrite || lk.w == nil) {
		return nil, fmt.Errorf("%s: Config.WaitRW needs Config.ReadWrite and a driver that implements Waiter: %w", cfg.Name, lockswap.ErrInvalid)
	}
	lk.stop, lk.stopNow = context.WithCancel(context.Background())
	lk.deadlines = attempt.NewDeadlines(lk.stop)
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
	if cfg.Queue && cfg.Permits && !cfg.WaitPermits {
		lk.pq = localq.NewShared(cfg.Name)
	}
	return lk, nil
}

// queueOf returns the local queue of a's kind: the mutex's, the permits'
// or none (read-write holds do not queue). Nil: none.
func (lk *Locker[D]) queueOf(a ask) *localq.Queue {
	switch {
	case a.rw != lockswap.NotRW:
		return nil
	case a.permits > 0:
		return lk.pq
	}
	return lk.q
}

// queues returns the Locker's local queues, the mutex's and the
// permits', each nil when the Locker has none.
func (lk *Locker[D]) queues() [2]*localq.Queue { return [2]*localq.Queue{lk.q, lk.pq} }

// Guarantees returns Config.Guarantees, whose Permits is Config.Permits
// and ReadWrite Config.ReadWrite.
func (lk *Locker[D]) Guarantees() lockswap.Guarantees { return lk.cfg.Guarantees }

// TTLRange returns the TTLs Acquire, TryAcquire and Extend accept.
func (lk *Locker[D]) TTLRange() (min, max time.Duration) { return lk.min, lk.max }

// DefaultTTL returns the TTL Acquire and TryAcquire use without
// lockswap.WithTTL.
func (lk *Locker[D]) DefaultTTL() time.Duration { return lk.cfg.TTL }

// Waiting returns how many Acquire calls of this Locker wait for key in
// its local queues (its mutex's and its permits'), the ones asking the
// backend included (always 0 without Config.Queue).
func (lk *Locker[D]) Waiting(key string) int {
	n := 0
	for _, q := range lk.queues() {
		if q != nil {
			n += q.Waiting(key)
		}
	}
	return n
}

// Parked returns how many Acquire calls of this Locker wait for key
// between attempts (always 0 without Config.Queue): a release of key's
// mutex through this Locker makes the first one's attempt in its own
// request when the driver implements HandOver. Waiting counts also those
// attempting now.
func (lk *Locker[D]) Parked(key string) int {
	n := 0
	for _, q := range lk.queues() {
		if q != nil {
			n += q.Parked(key)
		}
	}
	return n
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
	// The deadlines first: their registration with lk.stop is undone
	// before stopNow could start it in a goroutine of its own.
	lk.deadlines.Close()
	lk.stopNow()
	for _, q := range lk.queues() {
		if q != nil {
			q.Close()
		}
	}
	lk.bg.Close()
	if lk.cfg.Closer != nil {
		return lk.cfg.Closer.Close()
	}
	return nil
}

// WaitingKeys returns how many lines of Acquire calls of this Locker wait
// (a key's mutex and its permits have one each): 0 once every wait has
// ended (the queues keep nothing behind).
func (lk *Locker[D]) WaitingKeys() int {
	n := 0
	for _, q := range lk.queues() {
		if q != nil {
			n += q.Keys()
		}
	}
	return n
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
