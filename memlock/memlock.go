// Package memlock is an in-process lockswap.Locker: locks live in a map in
// this process. It is for users' own unit tests and for examples that need
// no server; it excludes only goroutines that share one *Store.
//
// It is also the smallest backend built with the kit (package driver): its
// driver below is all of its protocol.
package memlock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// Store holds the locks. Lockers made from one Store exclude each other.
type Store struct {
	mu    sync.Mutex
	locks map[string]entry
	fence map[string]uint64
	sems  map[string]*semaphore // counting semaphores (permits.go)
	rws   map[string]*rwlock    // read-write locks (rwlock.go)
}

type entry struct {
	token   string
	expires time.Time
}

// NewStore returns an empty Store that uses the real clock.
func NewStore() *Store {
	return &Store{locks: map[string]entry{}, fence: map[string]uint64{},
		sems: map[string]*semaphore{}, rws: map[string]*rwlock{}}
}

// Locker is a lockswap.Locker over a Store.
type Locker struct {
	*driver.Locker[struct{}]
}

// Guarantees returns memlock's guarantees: in-process, fenced, polling;
// nothing survives the process.
func Guarantees() lockswap.Guarantees {
	return lockswap.Guarantees{Backend: "memlock", Fencing: true, Clock: lockswap.ClockNone,
		Nodes: 1, StaleReleaseSafe: true, Wait: lockswap.WaitPoll, DeadlineOverrun: lockswap.DeadlineGrace, Permits: true, ReadWrite: true,
		Notes: []string{"in-process only: excludes goroutines sharing one Store, not processes"}}
}

// Options configure a Locker made with NewWithOptions. The zero value is
// what New uses.
type Options struct {
	// TTL is the default TTL of Acquire and TryAcquire (lockswap.WithTTL
	// overrides it); zero means lockswap.DefaultTTL.
	TTL time.Duration
	// Retry is Acquire's default retry policy; nil means every 5 ms.
	Retry lockswap.RetryStrategy
	// Logger, when set, receives the events a person must see (a lock
	// lost, a release that failed; see docs/observability.md); nil logs
	// nothing.
	Logger *slog.Logger
	// LogKeys adds lock keys to the records (off: keys may be sensitive).
	LogKeys bool
}

// New returns a Locker over s that retries every 5 ms by default, with
// the default TTL lockswap.DefaultTTL.
func New(s *Store) *Locker {
	lk, err := NewWithOptions(s, Options{})
	if err != nil {
		panic(err) // the zero Options are valid
	}
	return lk
}

// NewWithOptions returns a Locker over s configured by opts. A TTL outside
// [lockswap.MinTTL, lockswap.MaxTTL] fails with an error matching
// lockswap.ErrInvalid.
func NewWithOptions(s *Store, opts Options) (*Locker, error) {
	if opts.Retry == nil {
		opts.Retry = lockswap.ConstantRetry(5 * time.Millisecond)
	}
	lk, err := driver.New[struct{}](store{s}, driver.Config{
		Name:       "memlock",
		Guarantees: Guarantees(),
		TTL:        opts.TTL,
		Retry:      opts.Retry,
		Fence:      true,
		Queue:      true,
		Permits:    true,
		ReadWrite:  true,
		Logger:     opts.Logger,
		LogKeys:    opts.LogKeys,
	})
	if err != nil {
		return nil, err
	}
	return &Locker{lk}, nil
}

// store is memlock's driver: its protocol is a map under a mutex.
type store struct{ *Store }

// Acquire takes key for c.TTL if nobody holds it.
func (s store) Acquire(_ context.Context, c *driver.Claim[struct{}]) (driver.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	switch {
	case c.Permits > 0:
		return s.acquirePermit(c, now)
	case c.RW != lockswap.NotRW:
		return s.acquireRW(c, now)
	}
	if k, name := s.kindOf(c.Key, now); k != free && k != mutexKind {
		return driver.Grant{}, fmt.Errorf("the key is %s, not a mutex's: %w", name, lockswap.ErrInvalid)
	}
	if e, ok := s.locks[c.Key]; ok && now.Before(e.expires) {
		return driver.Grant{}, lockswap.ErrHeld
	}
	s.locks[c.Key] = entry{token: c.Token, expires: now.Add(c.TTL)}
	s.fence[c.Key]++
	return driver.Grant{Fence: s.fence[c.Key]}, nil
}

// Extend moves c's expiry to ttl from now if c still holds its key.
func (s store) Extend(_ context.Context, c *driver.Claim[struct{}], ttl time.Duration) (driver.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case c.Permits > 0:
		return driver.Grant{}, s.extendPermit(c, ttl)
	case c.RW != lockswap.NotRW:
		return driver.Grant{}, s.extendRW(c, ttl)
	}
	if e, ok := s.locks[c.Key]; !ok || e.token != c.Token || !time.Now().Before(e.expires) {
		return driver.Grant{}, lostErr(e, ok, c)
	}
	s.locks[c.Key] = entry{token: c.Token, expires: time.Now().Add(ttl)}
	return driver.Grant{}, nil
}

// Release deletes c's key if c still holds it.
func (s store) Release(_ context.Context, c *driver.Claim[struct{}]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case c.Permits > 0:
		return s.releasePermit(c)
	case c.RW != lockswap.NotRW:
		return s.releaseRW(c)
	}
	e, ok := s.locks[c.Key]
	if !ok || e.token != c.Token {
		return lostErr(e, ok, c)
	}
	delete(s.locks, c.Key)
	if !time.Now().Before(e.expires) {
		return lostErr(e, ok, c)
	}
	return nil
}

// lostErr says why c no longer holds its key, whose entry is e (ok false:
// none).
func lostErr(e entry, ok bool, c *driver.Claim[struct{}]) error {
	if !ok || e.token != c.Token {
		return fmt.Errorf("taken over: %w", lockswap.ErrLost)
	}
	return fmt.Errorf("expired: %w", lockswap.ErrLost)
}
