// Package lockstate is the bookkeeping every backend's lock handle shares:
// key, token, fence, the deadline and the Done channel that closes at it.
package lockstate

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"
)

// DriftFactor and DriftFixed are the default clock drift allowance: a lock
// of TTL t is trusted until start + t - (t*DriftFactor + DriftFixed), the
// rule of the Redlock design.
const (
	DriftFactor = 0.01
	DriftFixed  = 2 * time.Millisecond
)

// QuoteKey quotes key for an error message, cut to at most 200 bytes of
// the key (a 1 MB key must not make a 1 MB error).
func QuoteKey(key string) string {
	const max = 200
	if len(key) <= max {
		return strconv.Quote(key)
	}
	return strconv.Quote(key[:max]) + "… (" + strconv.Itoa(len(key)) + " bytes)"
}

// Drift returns the default drift allowance for ttl.
func Drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*DriftFactor) + DriftFixed
}

// NewToken returns 128 random bits from crypto/rand, hex encoded.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// State is a held lock's shared state. Use New, or embed a State by value
// and call Init (one allocation fewer per lock).
//
// The Done channel and its timer are created on the first call to Done, so
// that a lock whose holder never asks costs no timer.
type State struct {
	key, token string
	fence      uint64
	hasFence   bool

	mu       sync.Mutex
	ttl      time.Duration // taken with, or last extended with
	deadline time.Time
	timer    *time.Timer   // nil until Done is first called
	done     chan struct{} // nil until Done is first called
	ended    bool
}

// closedChan is returned by Done when the lock ended before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// New returns the state of a lock held until deadline. Done closes at the
// deadline unless SetDeadline moves it first.
func New(key, token string, fence uint64, hasFence bool, deadline time.Time) *State {
	s := &State{}
	s.Init(key, token, fence, hasFence, deadline)
	return s
}

// Init sets up a State embedded by value. It must be called before any other
// method, once.
func (s *State) Init(key, token string, fence uint64, hasFence bool, deadline time.Time) {
	s.key, s.token, s.fence, s.hasFence, s.deadline = key, token, fence, hasFence, deadline
}

// SetFence sets the fence of a lock whose State was set up before its
// fence was known; it must be called before the lock is handed out (Fence
// does not lock).
func (s *State) SetFence(fence uint64, hasFence bool) { s.fence, s.hasFence = fence, hasFence }

// Key returns the lock's key.
func (s *State) Key() string { return s.key }

// Token returns the lock's token.
func (s *State) Token() string { return s.token }

// Fence returns the fence and whether there is one.
func (s *State) Fence() (uint64, bool) { return s.fence, s.hasFence }

// TTL returns the TTL the lock was taken or last extended with (zero
// until SetTTL is called).
func (s *State) TTL() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttl
}

// SetTTL records the TTL the lock was taken or extended with.
func (s *State) SetTTL(ttl time.Duration) {
	s.mu.Lock()
	s.ttl = ttl
	s.mu.Unlock()
}

// Deadline returns the current deadline.
func (s *State) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Done returns the channel closed at the deadline or on End.
func (s *State) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return s.done
	}
	if s.endedLocked() {
		s.ended = true
		s.done = closedChan
		return s.done
	}
	s.done = make(chan struct{})
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	return s.done
}

// Ended reports whether the lock has ended: End was called, or the deadline
// passed (Done is, or would be, closed).
func (s *State) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedLocked()
}

// EndedAt reports whether the lock had ended at now (a time with a
// monotonic reading, as time.Now's): End was called, or the deadline had
// passed. It saves a caller that already read the clock a second read
// (history.Section).
func (s *State) EndedAt(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended || !now.Before(s.deadline)
}

// endedLocked is Ended with s.mu held. time.Until reads the monotonic
// clock alone when the deadline carries a monotonic reading (a deadline
// computed from time.Now does), where time.Now reads the wall clock too;
// for a deadline without one it compares wall clocks, as
// time.Now().Before would.
func (s *State) endedLocked() bool {
	return s.ended || time.Until(s.deadline) <= 0
}

// SetDeadline moves the deadline (after a successful extension). It returns
// false, changing nothing, when the lock has already ended: a lock whose
// holder was told it is lost stays lost.
func (s *State) SetDeadline(deadline time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endedLocked() {
		s.endLocked()
		return false
	}
	s.deadline = deadline
	if s.timer != nil {
		s.timer.Reset(time.Until(deadline))
	}
	return true
}

// End closes Done (loss detected, or released) and stops the timer.
func (s *State) End() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked()
}

func (s *State) endLocked() {
	if s.ended {
		return
	}
	s.ended = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.done != nil && s.done != closedChan {
		close(s.done)
	}
}

func (s *State) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A Reset may have raced with this call: only end if the deadline has
	// really passed.
	if d := time.Until(s.deadline); d > 0 && !s.ended {
		s.timer.Reset(d)
		return
	}
	s.endLocked()
}
