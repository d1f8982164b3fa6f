package lockstate

import (
	"testing"
	"time"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestDoneClosesAtDeadline(t *testing.T) {
	// Far enough that a loaded machine gets to the first check before it.
	s := New("k", NewToken(), 0, false, time.Now().Add(500*time.Millisecond))
	done := s.Done()
	if closed(done) {
		t.Fatal("Done closed before the deadline")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after a 500ms deadline")
	}
	if time.Now().Before(s.Deadline()) {
		t.Error("Done closed before the deadline")
	}
	if s.SetDeadline(time.Now().Add(time.Hour)) {
		t.Error("SetDeadline succeeded on an ended lock: a holder told of loss must stay lost")
	}
}

func TestSetDeadlineMovesTimer(t *testing.T) {
	// Far enough that a loaded machine moves it before it passes.
	s := New("k", NewToken(), 0, false, time.Now().Add(500*time.Millisecond))
	done := s.Done()
	if !s.SetDeadline(time.Now().Add(time.Hour)) {
		t.Fatal("SetDeadline on a live lock failed")
	}
	time.Sleep(time.Second) // past the first deadline: the moved timer must not fire
	if closed(done) || s.Ended() {
		t.Fatal("Done closed at the old deadline after SetDeadline moved it")
	}
	s.End()
	if !closed(done) || !s.Ended() {
		t.Fatal("End did not close Done")
	}
}

func TestDoneAskedLate(t *testing.T) {
	s := New("k", NewToken(), 0, false, time.Now().Add(-time.Millisecond))
	if !closed(s.Done()) || !s.Ended() {
		t.Fatal("Done of a lock past its deadline, asked for the first time, is open")
	}
	e := New("k", NewToken(), 0, false, time.Now().Add(time.Hour))
	e.End()
	if !closed(e.Done()) {
		t.Fatal("Done of an ended lock, asked for the first time, is open")
	}
}

func TestTokens(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		tok := NewToken()
		if len(tok) != 32 || seen[tok] {
			t.Fatalf("token %q: want 32 hex characters (128 bits), unique", tok)
		}
		seen[tok] = true
	}
}
