package lockswap

import "strconv"

// RWMode is the kind of hold a call takes of a key's read-write lock.
type RWMode uint8

// The holds of a read-write lock.
const (
	// NotRW is a call on the key's mutex (or, with [WithPermits], its
	// counting semaphore): not a read-write lock.
	NotRW RWMode = iota
	// ReadHold is shared: any number of read holds at once, and no write
	// hold meanwhile.
	ReadHold
	// WriteHold is exclusive: no other hold of the key at once.
	WriteHold
)

// String returns "read", "write" or "mutex".
func (m RWMode) String() string {
	switch m {
	case NotRW:
		return "mutex"
	case ReadHold:
		return "read"
	case WriteHold:
		return "write"
	}
	return "RWMode(" + strconv.Itoa(int(m)) + ")"
}

// WithRead makes Acquire and TryAcquire take a read hold of key's
// read-write lock instead of key's mutex: shared with the other read
// holds, exclusive of write holds. WithWrite takes the write hold,
// exclusive of every other hold. Both are a [Lock] (Token, Fence,
// Deadline, Done, Extend, Release; [Do] works with them).
//
// A mutex, a semaphore and a read-write lock on one key are refused with
// [ErrInvalid] at once, as the configuration errors they are; so are
// WithRead with WithWrite, and either with [WithPermits]. A backend
// without read-write locks ([Guarantees].ReadWrite false) refuses both
// options with ErrInvalid.
//
// Writers are not starved by a stream of readers: the policy is writer
// preference. While a writer's Acquire waits, new read holds are refused
// with [ErrHeld] (TryAcquire) or wait (Acquire); the held read holds go
// on to their Release or expiry, then the writer gets the key. A
// waiting writer marks the key until the end of its own wait (its
// context's deadline, at most one TTL after its latest attempt); an
// Acquire that gives up removes its mark as it returns, and a writer
// that crashes keeps readers out for at most that long. A retry policy
// whose delay exceeds the writer's TTL lets the mark lapse between
// attempts. TryAcquire with WithWrite does not mark the key. A backend that
// queues (etcdlease) serves holds in arrival order, which keeps the same
// promise: a reader that comes after a waiting writer waits behind it.
//
// Fences: every hold, read or write, takes a fence higher than those of
// the holds it conflicts with that were granted before it (the next
// fence of the key, in grant order, on memlock and singleredis; its queue
// key's create revision on etcdlease). A resource guarded by the lock keeps
// the highest fence of any hold it has seen and the highest fence of a
// write; it accepts a write whose fence is at least the former, and a
// read whose fence is at least the latter (fenced.RW). A holder that lost
// its hold to a later conflicting holder is then rejected once that
// holder has used the resource, and no legitimate holder ever is
// (docs/rwlocks.md).
func WithRead() Option { return Option{kind: optRW, n: int(ReadHold)} }

// WithWrite makes Acquire and TryAcquire take the write hold of key's
// read-write lock: see [WithRead].
func WithWrite() Option { return Option{kind: optRW, n: int(WriteHold)} }

// ModeOf returns the kind of hold l is of its key's read-write lock
// ([ReadHold], [WriteHold]), or [NotRW] for a mutex's lock or a permit. A
// wrapper of a Lock (lockswap/otel's) is looked through by its Unwrap()
// Lock method.
func ModeOf(l Lock) RWMode {
	for l != nil {
		if h, ok := l.(interface{ RWMode() RWMode }); ok {
			return h.RWMode()
		}
		u, ok := l.(interface{ Unwrap() Lock })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	return NotRW
}
