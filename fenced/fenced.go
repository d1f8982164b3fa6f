// Package fenced is a checker for lock safety: a protected resource that
// counts holders overlapping in time and rejects writes that carry a fence
// older than one it has already seen.
//
// Enter/Exit bracket a critical section; Overlaps counts every Enter that
// found another holder inside. Write applies the fencing rule a real
// resource (a database row, a file server) would apply. A run's verdict is
// the number of mutual exclusion violations observed and how many stale
// writes fencing caught.
package fenced

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStale is returned by Write when the writer's fence is older than the
// newest fence the resource has accepted.
var ErrStale = errors.New("stale fence")

// Resource is a protected resource. The zero value is ready to use and safe
// for concurrent use.
type Resource struct {
	mu         sync.Mutex
	inside     int
	maxInside  int
	overlaps   int
	entries    int
	highest    uint64
	accepted   int
	rejected   int
	unfenced   int
	lastWriter string
}

// Enter records that holder entered its critical section. It returns false
// when another holder was already inside: a mutual exclusion violation.
func (r *Resource) Enter(holder string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries++
	r.inside++
	if r.inside > r.maxInside {
		r.maxInside = r.inside
	}
	if r.inside > 1 {
		r.overlaps++
		return false
	}
	return true
}

// Exit records that a holder left its critical section.
func (r *Resource) Exit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inside == 0 {
		panic("fenced: Exit without Enter")
	}
	r.inside--
}

// Write applies a write by holder with fence. It returns an error matching
// [ErrStale], and changes nothing, when fence is lower than the highest
// fence already accepted; equal fences are the same holder writing again.
func (r *Resource) Write(holder string, fence uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.highest {
		r.rejected++
		return fmt.Errorf("write by %s with fence %d, resource has seen %d: %w", holder, fence, r.highest, ErrStale)
	}
	r.highest = fence
	r.accepted++
	r.lastWriter = holder
	return nil
}

// WriteUnfenced applies a write that carries no fence: it is always
// accepted, which is why a backend without fencing cannot stop a stale
// holder.
func (r *Resource) WriteUnfenced(holder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unfenced++
	r.accepted++
	r.lastWriter = holder
}

// Stats is a snapshot of what the resource observed.
type Stats struct {
	Entries       int    // critical sections entered
	Overlaps      int    // entries that found another holder inside
	MaxConcurrent int    // most holders inside at once
	Accepted      int    // writes accepted
	Rejected      int    // writes rejected as stale by fencing
	HighestFence  uint64 // newest fence accepted
	LastWriter    string // holder of the last accepted write
}

// Stats returns what the resource has observed so far.
func (r *Resource) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Entries: r.entries, Overlaps: r.overlaps, MaxConcurrent: r.maxInside,
		Accepted: r.accepted, Rejected: r.rejected, HighestFence: r.highest, LastWriter: r.lastWriter}
}
