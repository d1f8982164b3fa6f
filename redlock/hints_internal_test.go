package redlock

import (
	"fmt"
	"testing"
	"time"
)

// TestFenceHintsBounded: the table of fence hints guesses one above the
// highest fence seen for a key, never lowers it, guesses from the clock for
// a key it has not seen, and holds at most maxHints keys however many it sees
// (docs/redlock.md: "it remembers up to 4096 keys").
func TestFenceHintsBounded(t *testing.T) {
	h := newFenceHints()
	at := time.UnixMicro(1_700_000_000_000_000)
	h.now = func() time.Time { return at }
	if g, want := h.guess("k"), at.Add(clockGuessMargin).UnixMicro(); g != want {
		t.Fatalf("guess for an unseen key: %d, want %d (the clock plus %v)", g, want, clockGuessMargin)
	}
	h.saw("k", 10)
	h.saw("k", 7) // an older grant's report: not a lowering
	if g := h.guess("k"); g != 11 {
		t.Fatalf("guess after fences 10 and 7: %d, want 11", g)
	}
	for i := range 3 * maxHints {
		h.saw(fmt.Sprintf("key-%d", i), int64(i))
	}
	if n := len(h.fence); n > maxHints {
		t.Fatalf("%d keys remembered, want at most %d", n, maxHints)
	}
	last := fmt.Sprintf("key-%d", 3*maxHints-1)
	if g := h.guess(last); g != 3*maxHints {
		t.Fatalf("guess for the key seen last: %d, want %d", g, 3*maxHints)
	}
}
