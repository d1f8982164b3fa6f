package redlock

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redisscript"
)

// TestFenceHintsBounded: the table of fence hints guesses the higher of
// one above the highest fence seen for a key (never lowered) and the clock
// plus redisscript.FenceGuessAhead − clockGuessMargin, from the clock for
// a key it has not seen, and holds at most maxHints keys however many it
// sees (docs/redlock.md: "it remembers up to 4096 keys").
func TestFenceHintsBounded(t *testing.T) {
	h := newFenceHints()
	at := time.UnixMicro(1_700_000_000_000_000)
	h.now = func() time.Time { return at }
	clock := at.Add(redisscript.FenceGuessAhead*time.Microsecond - clockGuessMargin).UnixMicro()
	if g := h.guess("k"); g != clock {
		t.Fatalf("guess for an unseen key: %d, want %d (the clock plus %v)", g, clock, 20*time.Millisecond-clockGuessMargin)
	}
	h.saw("k", clock+10)
	h.saw("k", clock+7) // an older grant's report: not a lowering
	if g := h.guess("k"); g != clock+11 {
		t.Fatalf("guess after fences clock+10 and clock+7: %d, want clock+11 (%d)", g, clock+11)
	}
	h.saw("old", clock-1000)
	if g := h.guess("old"); g != clock {
		t.Fatalf("guess for a key whose last fence is below the clock's guess: %d, want the clock's %d", g, clock)
	}
	for i := range 3 * maxHints {
		h.saw(fmt.Sprintf("key-%d", i), clock+int64(i))
	}
	if n := len(h.fence); n > maxHints {
		t.Fatalf("%d keys remembered, want at most %d", n, maxHints)
	}
	last := fmt.Sprintf("key-%d", 3*maxHints-1)
	if g := h.guess(last); g != clock+3*maxHints {
		t.Fatalf("guess for the key seen last: %d, want %d", g, clock+3*maxHints)
	}
}
