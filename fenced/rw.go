package fenced

import (
	"fmt"
	"sync"
)

// RW is a resource guarded by a read-write lock (lockswap.WithRead,
// lockswap.WithWrite), whose holds, read or write, each take the next
// fence of the key in the order they are granted. It keeps the highest
// fence of any hold it has seen and the highest fence of a write:
//
//   - a write is accepted when its fence is at least the highest fence of
//     any hold seen: a writer that lost its hold is rejected once a later
//     holder, reader or writer, has used the resource;
//   - a read is accepted when its fence is at least the highest fence of
//     a write: a reader that lost its hold is rejected once a later writer
//     has written.
//
// No legitimate holder is rejected: holds that conflict are granted one
// after the other, so while a hold is legitimate every fence a
// conflicting holder used is lower than its own; readers do not conflict,
// so a read does not raise the bar of other reads. The zero value is ready
// to use and safe for concurrent use.
type RW struct {
	mu       sync.Mutex
	newest   uint64 // the highest fence of any hold accepted
	written  uint64 // the highest fence of a write accepted
	accepted int
	rejected int
}

// Write applies a write by holder, whose write hold has fence. It returns
// an error matching [ErrStale], and changes nothing, when a hold with a
// higher fence has used the resource.
func (r *RW) Write(holder string, fence uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.newest {
		r.rejected++
		return fmt.Errorf("write by %s with fence %d after a hold with fence %d: %w", holder, fence, r.newest, ErrStale)
	}
	r.newest, r.written = fence, fence
	r.accepted++
	return nil
}

// Read applies a read by holder, whose read hold has fence. It returns an
// error matching [ErrStale], and changes nothing, when a write with a
// higher fence has been accepted.
func (r *RW) Read(holder string, fence uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fence < r.written {
		r.rejected++
		return fmt.Errorf("read by %s with fence %d after a write with fence %d: %w", holder, fence, r.written, ErrStale)
	}
	r.newest = max(r.newest, fence)
	r.accepted++
	return nil
}

// RWStats is a snapshot of what an RW resource observed.
type RWStats struct {
	Accepted int // reads and writes accepted
	Rejected int // reads and writes rejected as stale
}

// Stats returns what r has observed so far.
func (r *RW) Stats() RWStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RWStats{Accepted: r.accepted, Rejected: r.rejected}
}
