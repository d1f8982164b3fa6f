package fenced

import (
	"fmt"
	"sync"
)

// Slots is a resource guarded by the permits of a counting semaphore
// (lockswap.WithPermits): a fence per slot, since with several permits
// held at once "reject below the highest fence seen" would reject
// legitimate holders of other slots. A write carries the permit's slot
// (lockswap.Slot) and fence, and is rejected when the fence is older than
// the newest one accepted for that slot: a permit that lost its slot to a
// later holder is rejected, and no holder of another slot is. The zero
// value is ready to use and safe for concurrent use.
type Slots struct {
	mu       sync.Mutex
	newest   map[int]uint64
	accepted int
	rejected int
}

// Write applies a write by holder, which holds slot with fence. It
// returns an error matching [ErrStale], and changes nothing, when fence is
// lower than the newest fence accepted for slot; equal fences are the same
// holder writing again.
func (s *Slots) Write(holder string, slot int, fence uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.newest[slot] {
		s.rejected++
		return fmt.Errorf("write by %s with fence %d for slot %d, which has seen %d: %w", holder, fence, slot, s.newest[slot], ErrStale)
	}
	if s.newest == nil {
		s.newest = map[int]uint64{}
	}
	s.newest[slot] = fence
	s.accepted++
	return nil
}

// SlotStats is a snapshot of what a Slots resource observed.
type SlotStats struct {
	Accepted int // writes accepted
	Rejected int // writes rejected as stale by their slot's fence
}

// Stats returns what s has observed so far.
func (s *Slots) Stats() SlotStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SlotStats{Accepted: s.accepted, Rejected: s.rejected}
}
