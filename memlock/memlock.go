// Package memlock is an in-process lockswap.Locker: locks live in a map in
// this process. It is for users' own unit tests and for examples that need
// no server; it excludes only goroutines that share one *Store.
package memlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// Store holds the locks. Lockers made from one Store exclude each other.
type Store struct {
	mu    sync.Mutex
	locks map[string]entry
	fence map[string]uint64
}

type entry struct {
	token   string
	expires time.Time
}

// NewStore returns an empty Store that uses the real clock.
func NewStore() *Store {
	return &Store{locks: map[string]entry{}, fence: map[string]uint64{}}
}

// Locker is a lockswap.Locker over a Store.
type Locker struct {
	s      *Store
	retry  lockswap.RetryStrategy
	closed atomic.Bool
}

// New returns a Locker over s that retries every 5 ms by default.
func New(s *Store) *Locker {
	return &Locker{s: s, retry: lockswap.ConstantRetry(5 * time.Millisecond)}
}

// Guarantees: in-process, fenced, polling; nothing survives the process.
func (lk *Locker) Guarantees() lockswap.Guarantees {
	return lockswap.Guarantees{Backend: "memlock", Fencing: true, Clock: lockswap.ClockNone,
		Nodes: 1, StaleReleaseSafe: true, Wait: lockswap.WaitPoll,
		Notes: []string{"in-process only: excludes goroutines sharing one Store, not processes"}}
}

// Close marks the Locker closed: waiting Acquire calls end with
// lockswap.ErrClosed at their next attempt (after the retry delay, 5 ms
// by default), and Extend and Release of its locks return ErrClosed.
func (lk *Locker) Close() error { lk.closed.Store(true); return nil }

// TTLRange returns the TTLs memlock accepts: [lockswap.MinTTL,
// lockswap.MaxTTL].
func (lk *Locker) TTLRange() (min, max time.Duration) { return lockswap.MinTTL, lockswap.MaxTTL }

// Acquire waits for the lock per the retry policy until ctx ends.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	return lockswap.Retry(ctx, o.Retry, func(context.Context) (lockswap.Lock, error) {
		if lk.closed.Load() {
			return nil, fmt.Errorf("memlock: acquire %s: %w", lockstate.QuoteKey(key), lockswap.ErrClosed)
		}
		return lk.try(key, o.TTL)
	})
}

// TryAcquire makes one attempt.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	return lk.try(key, o.TTL)
}

func (lk *Locker) prepare(key string, opts []lockswap.Option) (lockswap.Options, error) {
	return lockswap.PrepareAcquire("memlock", lk.closed.Load(), key, lk.retry, opts)
}

func (lk *Locker) try(key string, ttl time.Duration) (lockswap.Lock, error) {
	s := lk.s
	start := time.Now() // the deadline counts from before the lock was taken
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if e, ok := s.locks[key]; ok && now.Before(e.expires) {
		return nil, fmt.Errorf("memlock: acquire %s: %w", lockstate.QuoteKey(key), lockswap.ErrHeld)
	}
	token := lockstate.NewToken()
	s.locks[key] = entry{token: token, expires: now.Add(ttl)}
	s.fence[key]++
	return &lock{s: s, lk: lk, State: lockstate.New(key, token, s.fence[key], true, start.Add(ttl-lockstate.Drift(ttl)))}, nil
}

type lock struct {
	*lockstate.State
	s        *Store
	lk       *Locker
	released bool // guarded by s.mu
}

// owned reports whether the store still holds our token for the key.
func (l *lock) ownedLocked() bool {
	e, ok := l.s.locks[l.Key()]
	return ok && e.token == l.Token() && time.Now().Before(e.expires)
}

func (l *lock) Extend(_ context.Context, ttl time.Duration) error {
	if err := lockswap.ValidateTTL(ttl); err != nil {
		return fmt.Errorf("memlock: extend %s: %w", lockstate.QuoteKey(l.Key()), err)
	}
	if l.lk.closed.Load() {
		return fmt.Errorf("memlock: extend %s: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrClosed)
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.Ended() || !l.ownedLocked() {
		l.End()
		return fmt.Errorf("memlock: extend %s: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	start := time.Now()
	l.s.locks[l.Key()] = entry{token: l.Token(), expires: time.Now().Add(ttl)}
	l.SetDeadline(start.Add(ttl - lockstate.Drift(ttl)))
	return nil
}

func (l *lock) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.lk.closed.Load() && !l.released {
		return fmt.Errorf("memlock: release %s: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrClosed)
	}
	e, ok := l.s.locks[l.Key()]
	l.End()
	if l.released {
		return nil
	}
	if !ok || e.token != l.Token() {
		return fmt.Errorf("memlock: release %s: taken over: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	delete(l.s.locks, l.Key())
	l.released = true
	if !time.Now().Before(e.expires) {
		return fmt.Errorf("memlock: release %s: expired before release: %w", lockstate.QuoteKey(l.Key()), lockswap.ErrLost)
	}
	return nil
}
