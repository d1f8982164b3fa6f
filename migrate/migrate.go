// Package migrate is a Locker for moving a fleet off legacy SETNX/GETSET
// locks without a stop-the-world.
//
// Each client runs in one phase:
//
//   - PhaseLegacy: only the legacy lock, as old clients take it.
//   - PhaseDual: the legacy lock, then the target lock (any backend), always
//     in that order; released in reverse. A dual client excludes old clients
//     through the legacy lock and target-only clients through the target
//     lock.
//   - PhaseTarget: only the target lock; safe once no old client runs. With
//     Options.LegacyNet, a target client also treats a live legacy lock on
//     the same resource as held, which catches a forgotten old client.
//
// The rollout is: every client to PhaseDual; wait for the longest TTL plus
// the time configuration takes to reach every client; then every client to
// PhaseTarget. Rollback is the same steps in reverse. docs/migration.md is
// the runbook and says why each wait is needed.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// Phase is a step of the migration.
type Phase int

// The phases, in rollout order.
const (
	PhaseLegacy Phase = iota + 1
	PhaseDual
	PhaseTarget
)

// String returns "legacy", "dual" or "target".
func (p Phase) String() string {
	switch p {
	case PhaseLegacy:
		return "legacy"
	case PhaseDual:
		return "dual"
	case PhaseTarget:
		return "target"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// ParsePhase parses "legacy", "dual" or "target"; the error matches
// lockswap.ErrInvalid.
func ParsePhase(s string) (Phase, error) {
	for _, p := range []Phase{PhaseLegacy, PhaseDual, PhaseTarget} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("migrate: unknown phase %q (want legacy, dual or target): %w", s, lockswap.ErrInvalid)
}

// Locator is implemented by Redis backends: it names the server and the
// Redis key a lock name maps to, so that New can refuse a configuration in
// which the legacy and the target lock are the same Redis key.
type Locator interface {
	// Locate returns an identity of the store (the Redis backends give
	// redisclient.Store of their client: its address and database) and the
	// key under which the lock for key is stored there.
	Locate(key string) (store, storedKey string)
}

// Options configure a migration Locker.
type Options struct {
	// Phase is this client's phase.
	Phase Phase
	// Legacy is the legacy Locker (legacysetnx). Required in PhaseLegacy and
	// PhaseDual, and in PhaseTarget with LegacyNet.
	Legacy lockswap.Locker
	// Target is the Locker being migrated to. Required in PhaseDual and
	// PhaseTarget.
	Target lockswap.Locker
	// LegacyKey maps a lock name to the name passed to the legacy Locker
	// (the legacy Locker adds its own prefix). Nil means the same name.
	LegacyKey func(key string) string
	// LegacyNet, in PhaseTarget, also takes the legacy lock after the
	// target lock (released first): a live legacy lock (a forgotten old
	// client) makes the attempt fail with ErrHeld and calls OnLegacyNet,
	// and the legacy timestamp written keeps old clients out. An outage of
	// the legacy Redis fails the attempt with ErrUnavailable.
	LegacyNet bool
	// OnLegacyNet is called whenever the safety net finds a live legacy lock
	// (a forgotten old client): log it, count it.
	OnLegacyNet func(key string)
	// Retry is Acquire's default retry policy; nil means a random 5-25 ms.
	Retry lockswap.RetryStrategy
	// TTL is the default lock TTL for Acquire and TryAcquire, of both
	// locks; 0 means lockswap.DefaultTTL. A call's lockswap.WithTTL wins
	// over it.
	TTL time.Duration
	// Logger, when set, receives MsgLegacyNet, at level Warn, each time
	// the safety net finds a live legacy lock; nil logs nothing. The
	// Legacy and Target Lockers log their own events through their own
	// options.
	Logger *slog.Logger
	// LogKeys adds the lock's key to the records (off: keys may be
	// sensitive).
	LogKeys bool
}

// MsgLegacyNet is the message of the record written when the PhaseTarget
// safety net (Options.LegacyNet) finds a live legacy lock: an old client
// is still running, and the attempt failed with ErrHeld.
const MsgLegacyNet = "legacy lock held in target phase"

// ErrSameKey is wrapped by New's error when the legacy and the target lock
// would be the same Redis key on the same server.
var ErrSameKey = errors.New("legacy and target locks map to the same Redis key")

// Locker is the migration Locker.
type Locker struct {
	o         Options
	closing   chan struct{} // closed by Close: ends the dual locks' Done watchers
	closeOnce sync.Once
}

var _ lockswap.Locker = (*Locker)(nil)

// New returns a migration Locker. It refuses, with an error matching
// lockswap.ErrInvalid, a missing Locker for the phase, a safety net whose
// legacy Locker cannot probe, and a key mapping that would put both locks
// under one Redis key (an old client would read the target's token as an
// expired timestamp and overwrite it with GETSET, dropping the key's
// expiry: both sides would lose the lock and the key could stay forever).
func New(o Options) (*Locker, error) {
	if o.LegacyKey == nil {
		o.LegacyKey = func(k string) string { return k }
	}
	if o.Retry == nil {
		o.Retry = lockswap.JitterRetry(5*time.Millisecond, 25*time.Millisecond)
	}
	needLegacy := o.Phase == PhaseLegacy || o.Phase == PhaseDual || (o.Phase == PhaseTarget && o.LegacyNet)
	needTarget := o.Phase == PhaseDual || o.Phase == PhaseTarget
	switch {
	case o.Phase < PhaseLegacy || o.Phase > PhaseTarget:
		return nil, fmt.Errorf("migrate: phase %v: %w", o.Phase, lockswap.ErrInvalid)
	case needLegacy && o.Legacy == nil:
		return nil, fmt.Errorf("migrate: phase %v needs a legacy Locker: %w", o.Phase, lockswap.ErrInvalid)
	case needTarget && o.Target == nil:
		return nil, fmt.Errorf("migrate: phase %v needs a target Locker: %w", o.Phase, lockswap.ErrInvalid)
	}
	if o.Legacy != nil && o.Target != nil {
		if err := checkDistinct(o); err != nil {
			return nil, err
		}
	}
	lk := &Locker{o: o, closing: make(chan struct{})}
	if min, max := lk.TTLRange(); o.TTL != 0 && (o.TTL < min || o.TTL > max) {
		return nil, fmt.Errorf("migrate: Options.TTL %v is outside [%v, %v], the TTLs both locks of the migration accept: %w", o.TTL, min, max, lockswap.ErrInvalid)
	}
	return lk, nil
}

// DefaultTTL returns the TTL of an Acquire or TryAcquire without
// lockswap.WithTTL: Options.TTL, or lockswap.DefaultTTL.
func (lk *Locker) DefaultTTL() time.Duration {
	if lk.o.TTL != 0 {
		return lk.o.TTL
	}
	return lockswap.DefaultTTL
}

// withTTL puts Options.TTL before a call's options, which win over it,
// and which are passed on to the phase's Lockers.
func (lk *Locker) withTTL(opts []lockswap.Option) []lockswap.Option {
	if lk.o.TTL == 0 {
		return opts
	}
	return append([]lockswap.Option{lockswap.WithTTL(lk.o.TTL)}, opts...)
}

func checkDistinct(o Options) error {
	lloc, ok1 := o.Legacy.(Locator)
	tloc, ok2 := o.Target.(Locator)
	if !ok1 || !ok2 {
		return nil
	}
	for _, probe := range []string{"resource", "a:b", "x"} {
		ls, lk := lloc.Locate(o.LegacyKey(probe))
		ts, tk := tloc.Locate(probe)
		if ls == ts && lk == tk {
			return fmt.Errorf("migrate: lock %q is Redis key %q on %s for both the legacy and the target lock; use a different prefix or LegacyKey mapping: %w: %w",
				probe, lk, ls, ErrSameKey, lockswap.ErrInvalid)
		}
	}
	return nil
}

// Phase returns the Locker's phase.
func (lk *Locker) Phase() Phase { return lk.o.Phase }

// Guarantees are those of the lock that decides in this phase: the legacy
// lock's in PhaseLegacy, the target's in PhaseTarget. Where both locks are
// taken (PhaseDual, and PhaseTarget with LegacyNet), exclusion against old
// clients rests on the legacy lock and against target-only clients on the
// target lock, so each property is declared only if both locks have it
// (fencing excepted: Fence is the target lock's), and such a Locker waits by
// polling. No phase has counting semaphores (NoPermitsNote) or
// read-write locks (NoReadWriteNote).
func (lk *Locker) Guarantees() lockswap.Guarantees {
	g := lk.phaseGuarantees()
	g.Permits, g.ReadWrite = false, false
	g.Notes = append(append([]string(nil), g.Notes...), NoPermitsNote, NoReadWriteNote)
	return g
}

// NoPermitsNote is the note of Guarantees on counting semaphores, which
// migrate refuses in every phase (lockswap.WithPermits gets
// lockswap.ErrInvalid).
const NoPermitsNote = "no counting semaphores (WithPermits is refused with ErrInvalid): a migration moves mutexes off the legacy SETNX/GETSET pattern, which has no semaphores"

// NoReadWriteNote is the note of Guarantees on read-write locks, which
// migrate refuses in every phase (lockswap.WithRead and lockswap.WithWrite
// get lockswap.ErrInvalid).
const NoReadWriteNote = "no read-write locks (WithRead and WithWrite are refused with ErrInvalid): a migration moves mutexes off the legacy SETNX/GETSET pattern, which has no read-write locks"

// phaseGuarantees is Guarantees before the semaphores' note.
func (lk *Locker) phaseGuarantees() lockswap.Guarantees {
	switch {
	case lk.o.Phase == PhaseLegacy:
		g := lk.o.Legacy.Guarantees()
		g.Backend = "migrate(legacy)"
		return g
	case lk.o.Phase == PhaseTarget && !lk.o.LegacyNet:
		g := lk.o.Target.Guarantees()
		g.Backend = "migrate(target)"
		return g
	}
	t, l := lk.o.Target.Guarantees(), lk.o.Legacy.Guarantees()
	g := t
	g.Backend = "migrate(" + lk.o.Phase.String() + ")"
	g.SurvivesHolderPause = t.SurvivesHolderPause && l.SurvivesHolderPause
	g.SurvivesFailover = t.SurvivesFailover && l.SurvivesFailover
	g.SurvivesRestart = t.SurvivesRestart && l.SurvivesRestart
	g.StaleReleaseSafe = t.StaleReleaseSafe && l.StaleReleaseSafe
	g.Clock = max(t.Clock, l.Clock)
	g.Tolerates = min(t.Tolerates, l.Tolerates)
	g.Wait = lockswap.WaitPoll
	g.Notes = append(append([]string(nil), t.Notes...), "both locks are taken: against old clients, exclusion rests on the legacy lock")
	return g
}

// TTLRange returns the TTLs the phase's Lockers all accept: the
// intersection of their ranges (see each backend's TTLRange).
func (lk *Locker) TTLRange() (min, max time.Duration) {
	min, max = lockswap.MinTTL, lockswap.MaxTTL
	for _, x := range []lockswap.Locker{lk.o.Legacy, lk.o.Target} {
		r, ok := x.(interface {
			TTLRange() (time.Duration, time.Duration)
		})
		if !ok {
			continue
		}
		lo, hi := r.TTLRange()
		if lo > min {
			min = lo
		}
		if hi < max {
			max = hi
		}
	}
	return min, max
}

// checkTTL refuses a TTL outside TTLRange with an error naming op and key.
func (lk *Locker) checkTTL(op, key string, ttl time.Duration) error {
	if min, max := lk.TTLRange(); ttl < min || ttl > max {
		return fmt.Errorf("migrate: %s %s: ttl %v is outside [%v, %v], the TTLs both locks of the migration accept: %w", op, lockstate.QuoteKey(key), ttl, min, max, lockswap.ErrInvalid)
	}
	return nil
}

// checkOptions checks the resolved options o of an acquire of key: its TTL
// (checkTTL), and no permits: a migration moves mutexes off the legacy
// SETNX/GETSET pattern, which has no counting semaphores, so there is no
// semaphore to keep exclusive across two backends (lockswap.WithPermits is
// refused with ErrInvalid); likewise no read-write holds
// (lockswap.WithRead, lockswap.WithWrite).
func (lk *Locker) checkOptions(key string, o lockswap.Options) error {
	if o.RW != lockswap.NotRW {
		return fmt.Errorf("migrate: acquire %s: With%s: a migration moves mutexes off the legacy pattern, which has no read-write locks: %w", lockstate.QuoteKey(key), map[lockswap.RWMode]string{lockswap.ReadHold: "Read", lockswap.WriteHold: "Write"}[o.RW], lockswap.ErrInvalid)
	}
	if o.Permits > 0 {
		return fmt.Errorf("migrate: acquire %s: WithPermits: a migration moves mutexes off the legacy pattern, which has no counting semaphores: %w", lockstate.QuoteKey(key), lockswap.ErrInvalid)
	}
	return lk.checkTTL("acquire", key, o.TTL)
}

// Close closes both Lockers.
func (lk *Locker) Close() error {
	lk.closeOnce.Do(func() { close(lk.closing) })
	var errs []error
	if lk.o.Legacy != nil {
		errs = append(errs, lk.o.Legacy.Close())
	}
	if lk.o.Target != nil {
		errs = append(errs, lk.o.Target.Close())
	}
	return errors.Join(errs...)
}

// Acquire waits for the lock(s) of the phase. With one lock (PhaseLegacy,
// PhaseTarget without LegacyNet) it is that Locker's own Acquire, which
// keeps its way of waiting (etcd's queue); with two it polls per the retry
// policy, never holding one lock while waiting for the other.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	if err := acquire.ValidateContext(ctx); err != nil {
		return nil, fmt.Errorf("migrate: acquire %s: %w", lockstate.QuoteKey(key), err)
	}
	opts = lk.withTTL(opts)
	o, err := lockswap.Options{Retry: lk.o.Retry}.Resolve(opts...)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire %s: %w", lockstate.QuoteKey(key), err)
	}
	if err := acquire.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := lk.checkOptions(key, o); err != nil {
		return nil, err
	}
	switch {
	case lk.o.Phase == PhaseLegacy:
		l, err := lk.o.Legacy.Acquire(ctx, lk.o.LegacyKey(key), opts...)
		if err != nil {
			return nil, err
		}
		return lk.newLock(key, l), nil
	case lk.o.Phase == PhaseTarget && !lk.o.LegacyNet:
		l, err := lk.o.Target.Acquire(ctx, key, opts...)
		if err != nil {
			return nil, err
		}
		return lk.newLock(key, l), nil
	}
	// Each attempt is the phase's TryAcquire calls, each bounded by its
	// Locker's own request timeout; the outage counts from the first.
	outage := acquire.NewOutage(o.MaxOutage, nil)
	l, err := acquire.Retry(ctx, outage.Strategy(o.Retry), outage.Wrap(0, func(ctx context.Context, _ time.Duration) (lockswap.Lock, error) {
		return lk.TryAcquire(ctx, key, opts...)
	}))
	return l, acquire.Name(err, "migrate: acquire "+lockstate.QuoteKey(key))
}

// TryAcquire makes one attempt at the lock(s) of the phase.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	if err := acquire.ValidateContext(ctx); err != nil {
		return nil, fmt.Errorf("migrate: acquire %s: %w", lockstate.QuoteKey(key), err)
	}
	opts = lk.withTTL(opts)
	opts = append(opts[:len(opts):len(opts)], lockswap.WithRetry(lockswap.NoRetry()))
	if err := acquire.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	o, err := lockswap.Options{}.Resolve(opts...)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire %s: %w", lockstate.QuoteKey(key), err)
	}
	if err := lk.checkOptions(key, o); err != nil {
		return nil, err
	}
	switch lk.o.Phase {
	case PhaseLegacy:
		l, err := lk.o.Legacy.TryAcquire(ctx, lk.o.LegacyKey(key), opts...)
		if err != nil {
			return nil, err
		}
		return lk.newLock(key, l), nil
	case PhaseDual:
		ll, err := lk.o.Legacy.TryAcquire(ctx, lk.o.LegacyKey(key), opts...)
		if err != nil {
			return nil, err
		}
		tl, err := lk.o.Target.TryAcquire(ctx, key, opts...)
		if err != nil {
			// Release keeps the caller's deadline and goes on in the
			// background when it cannot.
			_ = ll.Release(ctx)
			return nil, err
		}
		return lk.newLock(key, ll, tl), nil
	default:
		tl, err := lk.o.Target.TryAcquire(ctx, key, opts...)
		if err != nil || !lk.o.LegacyNet {
			if err != nil {
				return nil, err
			}
			return lk.newLock(key, tl), nil
		}
		// The safety net: while holding the target lock, also take the
		// legacy lock, so that a forgotten old client is excluded (it only
		// looks at the legacy key) and reported.
		ll, err := lk.o.Legacy.TryAcquire(ctx, lk.o.LegacyKey(key), opts...)
		if err != nil {
			// Release keeps the caller's deadline and goes on in the
			// background when it cannot.
			_ = tl.Release(ctx)
			if errors.Is(err, lockswap.ErrHeld) {
				if lk.o.OnLegacyNet != nil {
					lk.o.OnLegacyNet(key)
				}
				lk.logLegacyNet(key)
				return nil, fmt.Errorf("migrate: %q is held through the legacy lock (safety net: is an old client still running?): %w", key, err)
			}
			return nil, fmt.Errorf("migrate: legacy safety net for %q: %w", key, err)
		}
		l := lk.newLock(key, tl, ll)
		l.decider = 0
		return l, nil
	}
}

// logLegacyNet writes MsgLegacyNet for key.
func (lk *Locker) logLegacyNet(key string) {
	if lk.o.Logger == nil {
		return
	}
	attrs := []slog.Attr{slog.String("backend", "migrate"), slog.String("phase", lk.o.Phase.String()),
		slog.String("reason", "a forgotten old client holds the legacy lock; it was kept out, and so was this attempt")}
	if lk.o.LogKeys {
		attrs = append(attrs, slog.String("key", key))
	}
	lk.o.Logger.LogAttrs(context.Background(), slog.LevelWarn, MsgLegacyNet, attrs...)
}

// lock is one or two held locks, in acquisition order.
type lock struct {
	lk      *Locker
	key     string
	locks   []lockswap.Lock
	decider int // index of the lock whose token and fence the handle shows

	once sync.Once
	done chan struct{}
}

// newLock returns the lock over locks. With two locks, a goroutine closes
// Done when either lock's Done closes, or when the Locker is closed; it ends
// then (at Release, on loss, at the earlier deadline, or at Close).
func (lk *Locker) newLock(key string, locks ...lockswap.Lock) *lock {
	l := &lock{lk: lk, key: key, locks: locks, decider: len(locks) - 1}
	if len(locks) == 1 {
		return l
	}
	l.done = make(chan struct{})
	a, b := locks[0].Done(), locks[1].Done()
	go func() {
		select {
		case <-a:
		case <-b:
		case <-lk.closing:
		}
		l.end()
	}()
	return l
}

func (l *lock) end() { l.once.Do(func() { close(l.done) }) }

func (l *lock) Key() string { return l.key }

// Token is the deciding (target, or only) lock's token.
func (l *lock) Token() string { return l.locks[l.decider].Token() }

// Fence is the deciding lock's fence, where it has one.
func (l *lock) Fence() (uint64, bool) { return l.locks[l.decider].Fence() }

// TTL is the decider lock's TTL (every lock of the handle is taken and
// extended with the same).
func (l *lock) TTL() time.Duration { return l.locks[l.decider].TTL() }

// Deadline is the earliest of the held locks' deadlines: exclusion against
// every kind of client holds only until then.
func (l *lock) Deadline() time.Time {
	d := l.locks[0].Deadline()
	for _, x := range l.locks[1:] {
		if xd := x.Deadline(); xd.Before(d) {
			d = xd
		}
	}
	return d
}

// Done closes when any of the held locks' Done closes.
func (l *lock) Done() <-chan struct{} {
	if l.done == nil {
		return l.locks[0].Done()
	}
	return l.done
}

// Extend extends every held lock; it fails if any fails.
func (l *lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := acquire.ValidateContext(ctx); err != nil {
		return fmt.Errorf("migrate: extend %s: %w", lockstate.QuoteKey(l.key), err)
	}
	if err := l.lk.checkTTL("extend", l.key, ttl); err != nil {
		return err
	}
	var errs []error
	for _, x := range l.locks {
		if err := x.Extend(ctx, ttl); err != nil {
			errs = append(errs, err)
		}
	}
	if l.done != nil && len(errs) > 0 && errors.Is(errors.Join(errs...), lockswap.ErrLost) {
		l.end()
	}
	return errors.Join(errs...)
}

// Release releases in reverse order of acquisition: target, then legacy.
func (l *lock) Release(ctx context.Context) error {
	if err := acquire.ValidateContext(ctx); err != nil { // before l.end: nothing was released
		return fmt.Errorf("migrate: release %s: %w", lockstate.QuoteKey(l.key), err)
	}
	var errs []error
	for i := len(l.locks) - 1; i >= 0; i-- {
		if err := l.locks[i].Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if l.done != nil {
		l.end()
	}
	return errors.Join(errs...)
}
