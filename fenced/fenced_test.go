package fenced

import (
	"errors"
	"testing"
)

func TestOverlapCounted(t *testing.T) {
	var r Resource
	if !r.Enter("a") {
		t.Fatal("first holder reported an overlap")
	}
	if r.Enter("b") {
		t.Fatal("second holder inside at the same time was not reported")
	}
	r.Exit()
	r.Exit()
	if !r.Enter("c") {
		t.Fatal("holder after both left reported an overlap")
	}
	r.Exit()
	s := r.Stats()
	if s.Overlaps != 1 || s.MaxConcurrent != 2 || s.Entries != 3 {
		t.Fatalf("stats = %+v, want 1 overlap, max 2 inside, 3 entries", s)
	}
}

func TestStaleFenceRejected(t *testing.T) {
	var r Resource
	if err := r.Write("new", 7); err != nil {
		t.Fatal(err)
	}
	err := r.Write("old", 6)
	if !errors.Is(err, ErrStale) {
		t.Fatalf("write with older fence: err = %v, want ErrStale", err)
	}
	if err := r.Write("new", 7); err != nil {
		t.Fatalf("same holder writing again with its fence was rejected: %v", err)
	}
	s := r.Stats()
	if s.Rejected != 1 || s.HighestFence != 7 || s.LastWriter != "new" {
		t.Fatalf("stats = %+v: the stale write must change nothing", s)
	}
}
