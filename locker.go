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
	// the others retry per [WithRetry]. When the wait ends without the lock
	// the error matches [ErrHeld] or [ErrUnavailable] (the last cause), and
	// also ctx.Err() when the context ended the wait. An Acquire whose
	// context ended returns no lock and leaves none: the Redis backends let
	// a request already on its way finish (for up to 250 ms) and give back
	// a lock it took, since the server runs it whether or not anyone waits
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
	// stale holder's writes.
	Fence() (uint64, bool)
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
	// lost. Release runs even if ctx is already cancelled, bounded by
	// [CleanupTimeout].
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
	// non-positive TTL, a nil client, a value under the key that is not ours
	// to interpret. Nothing was changed.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed means the Locker was closed.
	ErrClosed = errors.New("locker closed")
)

// CleanupTimeout bounds cleanup that must run even when the caller's context
// is already cancelled: releasing after a failed attempt, and Release.
const CleanupTimeout = 2 * time.Second

// CleanupContext returns a context for cleanup work: it keeps ctx's values
// but not its cancellation, and ends after [CleanupTimeout].
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}
