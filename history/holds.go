package history

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
)

// The kinds of a Hold.
const (
	KindMutex  = "mutex"  // a mutex's lock: alone on its key
	KindPermit = "permit" // a permit of a counting semaphore (lockswap.WithPermits)
	KindRead   = "read"   // a read hold (lockswap.WithRead)
	KindWrite  = "write"  // a write hold (lockswap.WithWrite)
)

// Hold is one hold of a counting semaphore's permit or of a read-write
// lock's hold (or a mutex's lock), as its client saw it: from the return of its Acquire to the
// call of its Release, or to its deadline when that came first, the span
// in which the client acted as a holder. Holds whose spans overlap
// must be allowed to hold at once: at most Limit permits, any number of
// read holds, a write hold alone. (The mutex's check is Op's, on a
// register: holders of a semaphore may all write at once.)
type Hold struct {
	// Client is the client that held, from 0.
	Client int `json:"client"`
	// Key is the lock's key.
	Key string `json:"key"`
	// Token is the hold's.
	Token string `json:"token"`
	// Kind is KindPermit, KindRead, KindWrite or KindMutex.
	Kind string `json:"kind"`
	// Limit is a permit's limit.
	Limit int `json:"limit,omitempty"`
	// From is when Acquire returned, To when Release was called or the
	// hold's deadline passed, whichever came first: nanoseconds on the
	// Recorder's monotonic clock.
	From int64 `json:"from_ns"`
	To   int64 `json:"to_ns"`
}

// HoldRecorder collects the Holds of a run from any number of goroutines,
// with times on one monotonic clock. The zero value is not ready: use
// NewHoldRecorder.
type HoldRecorder struct {
	start time.Time
	mu    sync.Mutex
	holds []Hold
}

// NewHoldRecorder returns a HoldRecorder whose clock starts now.
func NewHoldRecorder() *HoldRecorder { return &HoldRecorder{start: time.Now()} }

// Held records that client held l from from (when its Acquire returned)
// until now, or until l's deadline when that came first. Call it before
// l's Release. The kind comes from l (lockswap.ModeOf, lockswap.Slot: a
// lock that is neither a read-write hold nor a permit is a mutex's), and
// limit is a permit's limit.
func (r *HoldRecorder) Held(client int, l lockswap.Lock, limit int, from time.Time) {
	to := time.Now()
	if d := l.Deadline(); d.Before(to) {
		to = d
	}
	kind := KindMutex
	_, permit := lockswap.Slot(l)
	switch {
	case lockswap.ModeOf(l) == lockswap.ReadHold:
		kind = KindRead
	case lockswap.ModeOf(l) == lockswap.WriteHold:
		kind = KindWrite
	case permit:
		kind = KindPermit
	}
	h := Hold{Client: client, Key: l.Key(), Token: l.Token(), Kind: kind, From: from.Sub(r.start).Nanoseconds(), To: to.Sub(r.start).Nanoseconds()}
	if kind == KindPermit {
		h.Limit = limit
	}
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
}

// Holds returns a copy of the Holds recorded so far.
func (r *HoldRecorder) Holds() []Hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.holds)
}

// CheckHolds returns the violations among holds, described, key by key:
// more permits at once than their limit, a write hold or a mutex's lock
// with any other hold, permits and read-write holds on one key at once,
// and permits of one key with two limits at once (or a limit below 1). A Hold whose To is before its From
// (its deadline passed before Acquire returned) held nothing. The check is
// exact: holds are taken to begin as late and end as early as their spans
// allow, which no correct order of the same calls can improve on.
func CheckHolds(holds []Hold) []string {
	type event struct {
		t     int64
		enter bool
		h     *Hold
	}
	byKey := map[string][]event{}
	for i := range holds {
		h := &holds[i]
		if h.To <= h.From {
			continue
		}
		byKey[h.Key] = append(byKey[h.Key], event{h.From, true, h}, event{h.To, false, h})
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, key := range keys {
		evs := byKey[key]
		// In time order, ends before beginnings at one instant: holds that
		// touch do not overlap.
		slices.SortFunc(evs, func(a, b event) int {
			if c := cmp.Compare(a.t, b.t); c != 0 {
				return c
			}
			switch {
			case a.enter == b.enter:
				return 0
			case a.enter:
				return 1
			}
			return -1
		})
		inside := map[string]int{} // kind: holds inside
		limits := map[int]int{}    // a permit limit: permits inside with it
		for _, e := range evs {
			h := e.h
			if !e.enter {
				inside[h.Kind]--
				if h.Kind == KindPermit {
					limits[h.Limit]--
				}
				continue
			}
			if v := violation(inside, limits, h); v != "" {
				out = append(out, fmt.Sprintf("key %q at %d ns: client %d's %s hold began while %s", key, e.t, h.Client, h.Kind, v))
			}
			inside[h.Kind]++
			if h.Kind == KindPermit {
				limits[h.Limit]++
			}
		}
	}
	return out
}

// violation says what makes h's beginning a violation, given the holds
// inside (by kind, and the permits by limit), or "".
func violation(inside map[string]int, limits map[int]int, h *Hold) string {
	if n := inside[KindMutex]; n > 0 {
		return "a mutex's lock was held"
	}
	switch h.Kind {
	case KindMutex:
		if n := inside[KindPermit] + inside[KindRead] + inside[KindWrite]; n > 0 {
			return fmt.Sprintf("%d other holds were held", n)
		}
	case KindPermit:
		if h.Limit < 1 {
			return fmt.Sprintf("its limit %d is below 1", h.Limit)
		}
		if n := inside[KindRead] + inside[KindWrite]; n > 0 {
			return fmt.Sprintf("%d read-write holds were held", n)
		}
		for limit, n := range limits {
			if n > 0 && limit != h.Limit {
				return fmt.Sprintf("%d permits of limit %d were held (its limit: %d)", n, limit, h.Limit)
			}
		}
		if n := inside[KindPermit]; n >= h.Limit {
			return fmt.Sprintf("%d permits of limit %d were held", n, h.Limit)
		}
	case KindRead, KindWrite:
		if n := inside[KindPermit]; n > 0 {
			return fmt.Sprintf("%d permits were held", n)
		}
		if n := inside[KindWrite]; n > 0 {
			return "a write hold was held"
		}
		if n := inside[KindRead]; h.Kind == KindWrite && n > 0 {
			return fmt.Sprintf("%d read holds were held", n)
		}
	default:
		return fmt.Sprintf("its kind %q is none of mutex, permit, read and write", h.Kind)
	}
	return ""
}
