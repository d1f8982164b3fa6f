// Package lockswap is one lock API over several lock services.
//
// A [Locker] takes named locks in one backend: Redlock over N independent
// Redis masters (package redlock), a single Redis (singleredis), the legacy
// SETNX/GETSET timestamp lock that old code still writes (legacysetnx), or
// etcd leases (etcdlease). Every backend passes the same conformance suite
// (package conformance) and describes what it keeps under which faults in
// its [Guarantees], so that the choice between them is made on facts.
//
// A held [Lock] carries its random token, a fencing number where the backend
// has one, the [Lock.Deadline] until which exclusion holds, and a [Lock.Done]
// channel that closes before that deadline or as soon as loss is detected.
// [Do] ties a lock to a piece of work: it renews the lock while the work runs
// and cancels the work's context before the lock can be lost.
package lockswap

import (
	"context"
	"errors"
	"time"
)

// Locker takes named locks in one backend. Implementations are safe for
// concurrent use by multiple goroutines.
type Locker interface {
	// Acquire waits until the lock on key is held, ctx is done, or the retry
	// policy gives up. A backend that can wait without polling (etcd) does;
	// the others retry per [WithRetry]. A held key is waited for until ctx
	// ends: give ctx a deadline. An outage ends the wait by itself after
	// [DefaultMaxOutage] (see [WithMaxOutage]), and errors that retrying
	// cannot fix (wrong password, missing permission, a value that is not a
	// lock) end it at once with [ErrInvalid]. When the wait ends without the
	// lock the error matches [ErrHeld] or [ErrUnavailable] (the last cause),
	// and also ctx.Err() when the context ended the wait. Acquire returns
	// within ctx's deadline plus [DeadlineGrace]. An Acquire whose context
	// ended returns no lock and leaves none: a request already on its way
	// gets [DeadlineGrace] to finish, and a lock it took is given back in
	// the background, since the server runs it whether or not anyone waits
	// for the reply.
	Acquire(ctx context.Context, key string, opts ...Option) (Lock, error)
	// TryAcquire makes one attempt. It returns an error matching [ErrHeld]
	// when another owner holds the key. Like Acquire, it returns no lock
	// and leaves none when ctx ended during the attempt.
	TryAcquire(ctx context.Context, key string, opts ...Option) (Lock, error)
	// Guarantees describes what this backend keeps under which faults.
	Guarantees() Guarantees
	// Close releases the Locker's resources (connections it owns, background
	// goroutines). Locks still held are not released by Close unless the
	// backend documents otherwise; they expire after their TTL.
	Close() error
}

// Lock is a held lock. Its methods are safe for concurrent use.
type Lock interface {
	// Key is the name the lock was taken under (without any backend prefix).
	Key() string
	// Token is the random value that identifies this holder: at least 128
	// bits from crypto/rand, hex encoded (or the backend's own identity where
	// the stored value cannot carry one, see legacysetnx).
	Token() string
	// Fence returns a number that strictly increases with every new holder
	// of the key, and true, when the backend provides one. A protected
	// resource that remembers the highest fence it has seen can reject a
	// stale holder's writes. For a permit of a counting semaphore
	// ([WithPermits]) the fence rises per slot ([Slot]): the resource
	// keeps the highest fence per slot (fenced.Slots), since holders of
	// other slots hold at the same time.
	//
	// How far "strictly increases" reaches under faults is the backend's
	// and is stated in its [Guarantees] Notes. etcdlease's fence is the
	// key's create revision: it survives what etcd's data survives.
	// singleredis's fence is max(counter + 1, the Redis server's clock in
	// microseconds), always below 2^53 (9007199254740992) so that JSON,
	// float64 and Lua carry it exactly. It keeps increasing across a
	// restart that loses the counter unless the server's clock is set back
	// across the restart by more than the downtime, and across a failover
	// unless the promoted replica's clock is behind the old primary's by
	// more than the failover took (a replica that lags in data only
	// repeats no fence). Two primaries taking writes at once (split brain)
	// can give interleaved or equal fences.
	Fence() (uint64, bool)
	// TTL is the time to live the lock was taken with, or last extended
	// with: what [Do] renews it by.
	TTL() time.Duration
	// Deadline is the time until which mutual exclusion holds, measured on
	// this process's monotonic clock from before the first request was sent:
	// start + validity - clock drift allowance. Extend moves it.
	Deadline() time.Time
	// Done is closed before Deadline unless the lock is extended, and as
	// soon as the backend detects that the lock is lost. It is also closed by
	// Release. Once closed it stays closed: the lock cannot be extended.
	Done() <-chan struct{}
	// Extend asks for ttl more validity, counted from now. It returns an
	// error matching [ErrLost] when the lock is no longer ours (expired, taken
	// over, Done already closed), and [ErrUnavailable] when the backend could
	// not confirm.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the lock up. It never removes another holder's lock. It
	// returns nil when our lock was removed (or was already released by this
	// handle) and an error matching [ErrLost] when the lock had already been
	// lost. Release runs even if ctx is already cancelled: it returns
	// within ctx's deadline plus [DeadlineGrace] (the grace from now when
	// ctx has already ended), and when the outcome is still unknown then it
	// returns an error matching [ErrUnavailable] and goes on in the
	// background, up to [CleanupTimeout] in all. After the Locker's Close it
	// returns [ErrClosed] (the lock expires at its TTL).
	Release(ctx context.Context) error
}

// Sentinel errors. Every error a backend returns for these cases matches one
// of them with [errors.Is]; the messages name the key and the backend.
var (
	// ErrHeld means another owner holds the key (contention).
	ErrHeld = errors.New("lock held by another owner")
	// ErrUnavailable means the backend could not be reached or no quorum
	// answered (outage). It says nothing about who holds the key.
	ErrUnavailable = errors.New("lock backend unavailable")
	// ErrLost means this lock is no longer ours: it expired, was taken over
	// or was deleted. Returned by Extend and Release, and by [Do] when the
	// lock was lost while the work ran.
	ErrLost = errors.New("lock lost")
	// ErrInvalid means a bad argument or configuration: an empty key, a
	// non-positive TTL, a nil client or context, a value under the key that
	// is not ours to interpret. Nothing was changed.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed means the Locker was closed.
	ErrClosed = errors.New("locker closed")
)

// CleanupTimeout bounds cleanup that must run even when the caller's context
// is already cancelled: releasing after a failed attempt, and Release. What
// is left of it when the caller's deadline comes runs in the background
// (on the Locker's time, ended by Close), not on the caller's time. On
// rueidis a cleanup request under a context that cannot be cancelled may
// end up to 16 ms sooner (see [RequestTimeout]).
const CleanupTimeout = 2 * time.Second

// DeadlineGrace is how long any call of a Locker or Lock may run past the
// end of its context: a request already on its way gets this long for its
// reply (so that a lock it took can be given back, and a release can be
// confirmed), and then the call returns. Every Acquire, TryAcquire,
// Extend, Release and Close returns within the caller's deadline plus
// DeadlineGrace (and the scheduling delays of a loaded machine), whatever
// the servers do: answer, refuse, hang, or answer ten seconds late. A
// cancellation of the context (as opposed to its deadline) that comes
// while a request is in flight may be noticed up to 10 ms late: a
// request registers with its caller's context only once it has been
// waited on that long, so that the short ones cost the context (shared by
// the caller's goroutines) nothing.
const DeadlineGrace = 100 * time.Millisecond

// RequestTimeout bounds one request of the Redis backends whatever the
// caller's context: a server that accepts and never answers fails the
// attempt as unavailable after RequestTimeout, so that a wait without a
// deadline still ends (see [DefaultMaxOutage]). Under a context that
// cannot be cancelled a request may end up to 16 ms before its bound:
// such requests share one timer per 16 ms slot rather than one each (an
// acquire's requests on every backend, and on rueidis the others too).
const RequestTimeout = 5 * time.Second

// cleanupContext returns a context for cleanup work: it keeps ctx's values
// but not its cancellation, and ends after [CleanupTimeout].
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}

// Slot returns the slot of the permit l holds, from 0 to its limit - 1,
// and true, when l is a permit of a counting semaphore ([WithPermits]);
// 0 and false for a mutex's lock. Fences rise per slot: a resource that
// guards slot k keeps the highest fence it saw for slot k. A wrapper of a
// Lock (lockswap/otel's) is looked through by its Unwrap() Lock method.
func Slot(l Lock) (int, bool) {
	for l != nil {
		if p, ok := l.(interface{ Slot() (int, bool) }); ok {
			return p.Slot()
		}
		u, ok := l.(interface{ Unwrap() Lock })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	return 0, false
}
