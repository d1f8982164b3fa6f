package fenced

import (
	"errors"
	"testing"
)

// TestRWRules: a write below any hold's fence seen, and a read below a
// write's, are rejected and change nothing; concurrent readers in any
// order, and a holder using the resource again with its own fence, are
// accepted.
func TestRWRules(t *testing.T) {
	var r RW
	steps := []struct {
		read  bool
		fence uint64
		stale bool
	}{
		{read: false, fence: 2},              // a writer
		{read: true, fence: 4},               // readers 4 and 3, granted after it, in either order
		{read: true, fence: 3},               //
		{read: false, fence: 2, stale: true}, // the writer again, after its hold ended
		{read: true, fence: 4},               // reader 4 again
		{read: false, fence: 5},              // the next writer
		{read: false, fence: 5},              // writing again
		{read: true, fence: 4, stale: true},  // reader 4 after the write
		{read: true, fence: 3, stale: true},  //
		{read: true, fence: 6},               // a reader after the writer
		{read: false, fence: 5, stale: true}, // the writer after that reader
	}
	for i, s := range steps {
		var err error
		if s.read {
			err = r.Read("h", s.fence)
		} else {
			err = r.Write("h", s.fence)
		}
		if s.stale != errors.Is(err, ErrStale) {
			t.Errorf("step %d (read %v, fence %d): err = %v, want stale %v", i+1, s.read, s.fence, err, s.stale)
		}
	}
	if st := r.Stats(); st.Rejected != 4 || st.Accepted != len(steps)-4 {
		t.Errorf("Stats() = %+v, want 4 rejected and %d accepted", st, len(steps)-4)
	}
}
