package bench

// Minimal lockswap.Locker adapters over the other Go lock libraries, so
// that TestLibrariesUnderNemesis (libhistory_test.go) runs them through the
// same workload and history check as lockswap's backends. They do what a
// user of each library would do after its README: take the lock with the
// library's own waiting, hold it, give it back with the library's call.
// None has a fence: Fence returns (0, false). Extend is not adapted (the
// workload does not extend). Their versions are bench/go.mod's; each
// adapter's options are in libRows (libhistory_test.go) and in
// docs/libraries.md.
//
// Done closes when the library says the lock ends: redsync's Mutex.Until();
// bsm/redislock, which says nothing, at the start of the attempt that took
// the lock plus its TTL; rueidislock and etcd's concurrency.Mutex renew the
// lock in the background, so Done is their own loss signal: the context
// rueidislock returns, the etcd session's Done.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/redis/rueidis/rueidislock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockswap/lockswap"
)

// libReleaseTimeout bounds one release by an adapter: past it the lock
// ends at its TTL, as with any release that could not be confirmed.
const libReleaseTimeout = time.Second

// libLock is a held lock of one of the libraries.
type libLock struct {
	key, token string
	ttl        time.Duration
	deadline   time.Time // zero: renewed by the library until lost
	done       chan struct{}
	once       sync.Once
	timer      *time.Timer
	release    func(context.Context) error
}

// newLibLock returns a lock whose Done closes at deadline (when not zero),
// when lost closes (when not nil), or on Release.
func newLibLock(key, token string, ttl time.Duration, deadline time.Time, lost <-chan struct{}, release func(context.Context) error) *libLock {
	l := &libLock{key: key, token: token, ttl: ttl, deadline: deadline, done: make(chan struct{}), release: release}
	if !deadline.IsZero() {
		l.timer = time.AfterFunc(time.Until(deadline), l.end)
	}
	if lost != nil {
		go func() {
			select {
			case <-lost:
				l.end()
			case <-l.done:
			}
		}()
	}
	return l
}

func (l *libLock) end() { l.once.Do(func() { close(l.done) }) }

func (l *libLock) Key() string           { return l.key }
func (l *libLock) Token() string         { return l.token }
func (l *libLock) Fence() (uint64, bool) { return 0, false }
func (l *libLock) TTL() time.Duration    { return l.ttl }
func (l *libLock) Deadline() time.Time   { return l.deadline }
func (l *libLock) Done() <-chan struct{} { return l.done }
func (l *libLock) Extend(context.Context, time.Duration) error {
	return fmt.Errorf("the library adapters do not extend: %w", lockswap.ErrInvalid)
}

func (l *libLock) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), libReleaseTimeout)
	defer cancel()
	err := l.release(ctx)
	if l.timer != nil {
		l.timer.Stop()
	}
	l.end()
	return err
}

// libErr classes a library's error for history.Workload, which retries
// ErrHeld and ErrUnavailable: held when the library says the key is taken.
func libErr(lib string, held bool, err error) error {
	class := lockswap.ErrUnavailable
	if held {
		class = lockswap.ErrHeld
	}
	return fmt.Errorf("%s: %w: %w", lib, class, err)
}

// libTTL resolves the call's TTL over def.
func libTTL(def time.Duration, opts []lockswap.Option) (time.Duration, error) {
	o, err := lockswap.Options{TTL: def}.Resolve(opts...)
	return o.TTL, err
}

// redsyncLocker: redsync's Mutex with its defaults (32 tries 50–250 ms
// apart, drift factor 0.01, timeout factor 0.05) and WithExpiry(TTL), over
// the pools given to redsync.New (1 server, or 3 for its Redlock).
type redsyncLocker struct {
	rs    *redsync.Redsync
	nodes int
	ttl   time.Duration
}

func (r *redsyncLocker) acquire(ctx context.Context, key string, opts []lockswap.Option, try bool) (lockswap.Lock, error) {
	ttl, err := libTTL(r.ttl, opts)
	if err != nil {
		return nil, err
	}
	m := r.rs.NewMutex(key, redsync.WithExpiry(ttl))
	if try {
		err = m.TryLockContext(ctx)
	} else {
		err = m.LockContext(ctx)
	}
	if err != nil {
		var taken *redsync.ErrTaken
		var nodeTaken *redsync.ErrNodeTaken
		held := errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
		return nil, libErr("redsync", held, err)
	}
	return newLibLock(key, m.Value(), ttl, m.Until(), nil, func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		switch {
		case ok:
			return nil
		case errors.Is(err, redsync.ErrLockAlreadyExpired):
			return fmt.Errorf("redsync: %w: %w", lockswap.ErrLost, err)
		default:
			return fmt.Errorf("redsync: unlock: %w: %v", lockswap.ErrUnavailable, err)
		}
	}), nil
}

func (r *redsyncLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return r.acquire(ctx, key, opts, false)
}

func (r *redsyncLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return r.acquire(ctx, key, opts, true)
}

func (r *redsyncLocker) Guarantees() lockswap.Guarantees {
	return lockswap.Guarantees{Backend: "redsync", Nodes: r.nodes, Tolerates: (r.nodes - 1) / 2,
		Notes: []string{"bench adapter of github.com/go-redsync/redsync/v4: no fencing"}}
}

func (r *redsyncLocker) Close() error { return nil }

// bsmLocker: bsm/redislock's Obtain with LinearBackoff(10 ms) as its retry
// strategy (its default is not to retry) until the caller's context ends,
// on one go-redis client.
type bsmLocker struct {
	c   *redislock.Client
	ttl time.Duration
}

// stampRetry is a redislock.RetryStrategy that notes when the next
// attempt is due: the start of the attempt that took the lock, for Done.
type stampRetry struct {
	inner redislock.RetryStrategy
	next  time.Time
}

func (s *stampRetry) NextBackoff() time.Duration {
	d := s.inner.NextBackoff()
	s.next = time.Now().Add(d)
	return d
}

func (b *bsmLocker) acquire(ctx context.Context, key string, opts []lockswap.Option, try bool) (lockswap.Lock, error) {
	ttl, err := libTTL(b.ttl, opts)
	if err != nil {
		return nil, err
	}
	retry := &stampRetry{inner: redislock.LinearBackoff(10 * time.Millisecond)}
	if try {
		retry.inner = redislock.NoRetry()
	}
	start := time.Now()
	l, err := b.c.Obtain(ctx, key, ttl, &redislock.Options{RetryStrategy: retry})
	if err != nil {
		held := errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)
		return nil, libErr("redislock", held, err)
	}
	if !retry.next.IsZero() {
		start = retry.next
	}
	return newLibLock(key, l.Token(), ttl, start.Add(ttl), nil, func(ctx context.Context) error {
		switch err := l.Release(ctx); {
		case err == nil:
			return nil
		case errors.Is(err, redislock.ErrLockNotHeld):
			return fmt.Errorf("redislock: %w: %w", lockswap.ErrLost, err)
		default:
			return fmt.Errorf("redislock: release: %w: %v", lockswap.ErrUnavailable, err)
		}
	}), nil
}

func (b *bsmLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return b.acquire(ctx, key, opts, false)
}

func (b *bsmLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return b.acquire(ctx, key, opts, true)
}

func (b *bsmLocker) Guarantees() lockswap.Guarantees {
	return lockswap.Guarantees{Backend: "bsm/redislock", Nodes: 1,
		Notes: []string{"bench adapter of github.com/bsm/redislock: no fencing"}}
}

func (b *bsmLocker) Close() error { return nil }

// rueidisLockWaitHistory bounds one wait of rueidislock's WithContext (a waiter
// whose wake-up was lost waits for ever: see rueidis_test.go); the
// workload then tries again.
const rueidisLockWaitHistory = 3 * time.Second

// rueidisLocker: rueidislock's WithContext on its own Locker (KeyMajority
// 1, KeyValidity = the TTL, renewed every TTL/2 by the library while
// held). Done is the context it returns, which it cancels when the lock is
// no longer held; Release is the cancel function it returns.
type rueidisLocker struct {
	lk  rueidislock.Locker
	ttl time.Duration
	id  string
	n   atomic.Int64
}

func (r *rueidisLocker) acquire(ctx context.Context, key string, opts []lockswap.Option, try bool) (lockswap.Lock, error) {
	ttl, err := libTTL(r.ttl, opts)
	if err != nil {
		return nil, err
	}
	if ttl != r.ttl {
		return nil, fmt.Errorf("rueidislock: its TTL is the Locker's KeyValidity (%v), not %v: %w", r.ttl, ttl, lockswap.ErrInvalid)
	}
	// The lock's context derives from wctx: cancel wctx only when the wait
	// timed out, or on release.
	wctx, wcancel := context.WithCancel(ctx)
	timer := time.AfterFunc(rueidisLockWaitHistory, wcancel)
	var lctx context.Context
	var cancel context.CancelFunc
	if try {
		lctx, cancel, err = r.lk.TryWithContext(wctx, key)
	} else {
		lctx, cancel, err = r.lk.WithContext(wctx, key)
	}
	if !timer.Stop() && err == nil {
		cancel()
		err = context.DeadlineExceeded
	}
	if err != nil {
		wcancel()
		return nil, libErr("rueidislock", errors.Is(err, rueidislock.ErrNotLocked) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded), err)
	}
	return newLibLock(key, fmt.Sprintf("%s-%d", r.id, r.n.Add(1)), ttl, time.Time{}, lctx.Done(), func(context.Context) error {
		lost := lctx.Err() != nil
		cancel()
		wcancel()
		if lost {
			return fmt.Errorf("rueidislock: %w", lockswap.ErrLost)
		}
		return nil
	}), nil
}

func (r *rueidisLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return r.acquire(ctx, key, opts, false)
}

func (r *rueidisLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return r.acquire(ctx, key, opts, true)
}

func (r *rueidisLocker) Guarantees() lockswap.Guarantees {
	return lockswap.Guarantees{Backend: "rueidislock", Nodes: 1,
		Notes: []string{"bench adapter of github.com/redis/rueidis/rueidislock: no fencing"}}
}

func (r *rueidisLocker) Close() error { r.lk.Close(); return nil }

// etcdMutexLocker: etcd's concurrency.Mutex, one NewMutex per
// acquisition, on this Locker's session (a lease of the TTL in whole
// seconds, kept alive by the client). A session found lost is replaced at
// the next Acquire.
type etcdMutexLocker struct {
	c      *clientv3.Client
	ttl    time.Duration
	prefix string
	mu     sync.Mutex
	sess   *concurrency.Session
}

func (e *etcdMutexLocker) session(ctx context.Context) (*concurrency.Session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess != nil {
		select {
		case <-e.sess.Done():
			e.sess = nil
		default:
			return e.sess, nil
		}
	}
	secs := int64(e.ttl / time.Second)
	// Grant here, under ctx: NewSession's own Grant waits without a bound.
	lease, err := e.c.Grant(ctx, secs)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(e.c, concurrency.WithTTL(int(secs)), concurrency.WithLease(lease.ID))
	if err != nil {
		return nil, err
	}
	e.sess = s
	return s, nil
}

// drop forgets s (after an error, which may mean its lease is gone): the
// next Acquire makes a new session. The old lease expires on its own.
func (e *etcdMutexLocker) drop(s *concurrency.Session) {
	e.mu.Lock()
	if e.sess == s {
		e.sess = nil
	}
	e.mu.Unlock()
	s.Orphan()
}

func (e *etcdMutexLocker) acquire(ctx context.Context, key string, opts []lockswap.Option, try bool) (lockswap.Lock, error) {
	ttl, err := libTTL(e.ttl, opts)
	if err != nil {
		return nil, err
	}
	if ttl != e.ttl {
		return nil, fmt.Errorf("etcd mutex: its TTL is the session's (%v), not %v: %w", e.ttl, ttl, lockswap.ErrInvalid)
	}
	s, err := e.session(ctx)
	if err != nil {
		return nil, libErr("etcd session", false, err)
	}
	m := concurrency.NewMutex(s, e.prefix+key)
	if try {
		err = m.TryLock(ctx)
	} else {
		err = m.Lock(ctx)
	}
	if err != nil {
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, libErr("etcd mutex", true, err)
		}
		if ctx.Err() == nil {
			e.drop(s)
		}
		return nil, libErr("etcd mutex", false, err)
	}
	token := fmt.Sprintf("%s@%d", m.Key(), m.Header().Revision)
	return newLibLock(key, token, ttl, time.Time{}, s.Done(), func(ctx context.Context) error {
		select {
		case <-s.Done():
			return fmt.Errorf("etcd mutex: session lost: %w", lockswap.ErrLost)
		default:
		}
		if err := m.Unlock(ctx); err != nil {
			return fmt.Errorf("etcd mutex: unlock: %w: %v", lockswap.ErrUnavailable, err)
		}
		return nil
	}), nil
}

func (e *etcdMutexLocker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return e.acquire(ctx, key, opts, false)
}

func (e *etcdMutexLocker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return e.acquire(ctx, key, opts, true)
}

func (e *etcdMutexLocker) Guarantees() lockswap.Guarantees {
	return lockswap.Guarantees{Backend: "etcd concurrency.Mutex", Nodes: 1,
		Notes: []string{"bench adapter of go.etcd.io/etcd/client/v3/concurrency: no fencing"}}
}

func (e *etcdMutexLocker) Close() error {
	e.mu.Lock()
	s := e.sess
	e.sess = nil
	e.mu.Unlock()
	if s != nil {
		s.Orphan()
	}
	return e.c.Close()
}
