// Package conformance is the test suite every lockswap backend passes.
//
// A backend hooks in with a [Harness] that makes independent Lockers over
// one shared store (each with its own connections: two Lockers are two
// clients, never one object playing both sides) and says which fault
// controls it offers. [Run] then checks the rules every Locker must keep;
// each failure message says which rule was broken, for the implementer.
//
//	func TestConformance(t *testing.T) {
//		mr := miniredis.RunT(t)
//		conformance.Run(t, conformance.Harness{
//			NewLocker:   func(t *testing.T) lockswap.Locker { ... },
//			TTL:         500 * time.Millisecond,
//			AdvanceTime: mr.FastForward,
//		})
//	}
package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// Harness connects a backend to the suite.
type Harness struct {
	// NewLocker returns a new Locker with its own connections to the shared
	// store. The suite closes it.
	NewLocker func(t *testing.T) lockswap.Locker
	// TTL is the lock TTL for cases that wait for expiry. On real servers
	// keep it short (a few hundred ms; etcd: the smallest it honours).
	TTL time.Duration
	// AdvanceTime, when set, moves the store's clock forward (miniredis
	// FastForward), so expiry needs no real waiting.
	AdvanceTime func(d time.Duration)
	// Expire, when set, makes a held lock expire on the server as if its
	// holder had crashed or paused: for a backend that keeps locks alive in
	// the background (etcd leases), it stops that. The suite then waits
	// until another Locker can take the key. When nil, the suite advances
	// time or waits for the TTL.
	Expire func(t *testing.T, holder lockswap.Locker, l lockswap.Lock)
	// Goroutines lists package path prefixes whose goroutines must not
	// outlive Close, beside lockswap's own.
	Goroutines []string
	// NewLockerTTL, when set, returns a new Locker whose own default TTL
	// (its Options.TTL) is ttl, or the error its constructor gives for it.
	// The DefaultTTL case then checks that a call without
	// lockswap.WithTTL takes that TTL, that WithTTL wins, and that a
	// default outside the backend's range is refused with ErrInvalid.
	NewLockerTTL func(t *testing.T, ttl time.Duration) (lockswap.Locker, error)
}

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	s := newSuite(t, h)
	s.run(t, []testCase{
		{"MutualExclusion", s.mutualExclusion},
		{"History", s.history},
		{"TryAcquireHeld", s.tryAcquireHeld},
		{"ExpiredHolderCannotReleaseOrExtend", s.expiredHolder},
		{"VanishedHolderFreedAfterTTL", s.vanishedHolder},
		{"ExtendKeepsLock", s.extendKeepsLock},
		{"TTLReported", s.ttlReported},
		{"DefaultTTL", s.defaultTTL},
		{"ReleaseIdempotent", s.releaseIdempotent},
		{"ReleaseWithCancelledContext", s.releaseCancelled},
		{"CancelWaitingAcquire", s.cancelWaiting},
		{"WaitLongerThanTTL", s.waitLongerThanTTL},
		{"TokensUnique", s.tokensUnique},
		{"DeadlineWithinTTL", s.deadlineWithinTTL},
		{"DoneByDeadline", s.doneByDeadline},
		{"Fencing", s.fencing},
		{"BadArguments", s.badArguments},
		{"OddKeys", s.oddKeys},
		{"AfterClose", s.afterClose},
		{"Close", s.closeLocker},
		{"CloseEndsWaiters", s.closeEndsWaiters},
		{"Do", s.do},
		{"PermitsGivenOrRefused", s.permitsGivenOrRefused},
		{"ReadWriteGivenOrRefused", s.rwGivenOrRefused},
	})
}

// testCase is one case of a suite.
type testCase struct {
	name string
	fn   func(*testing.T)
}

// newSuite checks h and returns the suite of its cases.
func newSuite(t *testing.T, h Harness) *suite {
	t.Helper()
	if h.NewLocker == nil || h.TTL <= 0 {
		t.Fatal("conformance: Harness needs NewLocker and a positive TTL")
	}
	return &suite{h: h}
}

// run runs cases as subtests of t.
func (s *suite) run(t *testing.T, cases []testCase) {
	for _, c := range cases {
		t.Run(c.name, c.fn)
	}
}

type suite struct {
	h   Harness
	seq int
	mu  sync.Mutex
}

func (s *suite) locker(t *testing.T) lockswap.Locker {
	t.Helper()
	l := s.h.NewLocker(t)
	if l == nil {
		t.Fatal("conformance: NewLocker returned nil")
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// key returns a key no other case uses.
func (s *suite) key(t *testing.T) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("conformance-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano(), s.seq)
}

// take is a TryAcquire of key on lk that the case needs: a failure ends
// the case with the message failed, whose %v is the error.
func take(t *testing.T, ctx context.Context, lk lockswap.Locker, key, failed string, opts ...lockswap.Option) lockswap.Lock {
	t.Helper()
	l, err := lk.TryAcquire(ctx, key, opts...)
	if err != nil {
		t.Fatalf(failed, err)
	}
	return l
}

// release is a Release of l that the case needs to succeed.
func release(t *testing.T, ctx context.Context, l lockswap.Lock) {
	t.Helper()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) ttl() lockswap.Option { return lockswap.WithTTL(s.h.TTL) }

// warmUp has lk take and release a lock on a key of its own, so that its
// connections (and an etcd lease, a fair wait's subscription) are up
// before a step that must fit in one short TTL: a first dial on a loaded
// machine can take longer than that.
func warmUp(ctx context.Context, lk lockswap.Locker, key string) {
	if l, err := lk.Acquire(ctx, key+"-warm-up", lockswap.WithTTL(10*time.Second)); err == nil {
		l.Release(ctx)
	}
}

// eventually polls cond until it is true or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expireAndTake makes l expire on the server and waits until other can
// take its key (with opts: WithPermits for a permit), returning other's
// lock, taken for 10 s: what the cases check of it must not depend on a
// loaded machine doing the next steps within one short TTL.
func (s *suite) expireAndTake(t *testing.T, holder lockswap.Locker, l lockswap.Lock, other lockswap.Locker, opts ...lockswap.Option) lockswap.Lock {
	t.Helper()
	ctx := ctxT(t)
	if s.h.Expire != nil {
		s.h.Expire(t, holder, l)
	} else if s.h.AdvanceTime != nil {
		s.h.AdvanceTime(s.h.TTL + time.Millisecond)
	}
	var got lockswap.Lock
	eventually(t, s.h.TTL*3+10*time.Second, "a lock whose holder stopped renewing was never freed: keys must expire after their TTL", func() bool {
		nl, err := other.TryAcquire(ctx, l.Key(), append(opts, lockswap.WithTTL(10*time.Second))...)
		if err == nil {
			got = nl
			return true
		}
		if !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("TryAcquire while waiting for expiry: %v (want success or ErrHeld)", err)
		}
		return false
	})
	return got
}

// blockedWithin bounds the wait for Acquire calls to block: a bound on
// the test, not a promise of the library. 100 waiters each make a first
// attempt (a round trip) before they wait, and a starved process (a CPU
// hog beside it at a higher priority) took more than 5 s for them.
const blockedWithin = 30 * time.Second

// waitBlocked waits (bounded) until n goroutines started by the suite's
// case fn are blocked inside an Acquire call: waiting on a channel, a
// timer, a lock or the network, which is what a waiting Acquire does.
func waitBlocked(t *testing.T, n int, fn string) {
	t.Helper()
	eventually(t, blockedWithin, fmt.Sprintf("%d Acquire calls waiting", n), func() bool {
		return blockedIn(".Acquire(", "conformance.(*suite)."+fn) >= n
	})
}

// waitSettled is waitBlocked for one call that must be seen blocked twice,
// 20 ms apart: a goroutine is also blocked for the millisecond its first
// request is in flight, and a call cancelled then has not yet learned what
// it waits for (an etcd Acquire writing its queue entry).
func waitSettled(t *testing.T, fn string) {
	t.Helper()
	eventually(t, blockedWithin, "an Acquire call waiting", func() bool {
		if blockedIn(".Acquire(", "conformance.(*suite)."+fn) < 1 {
			return false
		}
		time.Sleep(20 * time.Millisecond)
		return blockedIn(".Acquire(", "conformance.(*suite)."+fn) >= 1
	})
}

// blockedIn counts the goroutines blocked with both frames on their stack.
func blockedIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		if k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[running") || strings.Contains(header, "[runnable") {
			continue
		}
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			count++
		}
	}
	return count
}

// leaked returns the stacks of goroutines running code of lockswap (other
// than this suite and tests) or of the extra packages.
func leaked(extra []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lockswap/conformance.") || strings.Contains(g, "testing.tRunner") ||
			strings.Contains(g, "internal/servers.") {
			continue
		}
		match := strings.Contains(g, "github.com/lockswap/lockswap")
		for _, p := range extra {
			match = match || strings.Contains(g, p)
		}
		if match {
			out = append(out, g)
		}
	}
	return out
}
