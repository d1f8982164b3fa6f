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
// a key it has not seen, the hint alone for clockAheadFor once a fence
// came out below the clock's guess (a clock ahead of the masters'), and
// holds at most
// maxHints keys however many it sees (docs/redlock.md: "it remembers up
// to 4096 keys").
func TestFenceHintsBounded(t *testing.T) {
	h := newFenceHints()
	at := time.UnixMicro(1_700_000_000_000_000)
	h.now = func() time.Time { return at }
	clock := at.Add(redisscript.FenceGuessAhead*time.Microsecond - clockGuessMargin).UnixMicro()
	if g, c := h.guess("k"); g != clock || c != clock {
		t.Fatalf("guess for an unseen key: %d (clock %d), want %d (the clock plus %v)", g, c, clock, 20*time.Millisecond-clockGuessMargin)
	}
	h.saw("k", clock+10, clock+10, clock)
	h.saw("k", clock+7, clock+7, clock) // an older grant's report: not a lowering
	if g, _ := h.guess("k"); g != clock+11 {
		t.Fatalf("guess after fences clock+10 and clock+7: %d, want clock+11 (%d)", g, clock+11)
	}
	h.saw("old", clock-1000, clock-1000, clock-2000)
	if g, _ := h.guess("old"); g != clock {
		t.Fatalf("guess for a key whose last fence is below the clock's guess: %d, want the clock's %d", g, clock)
	}
	h.saw("ahead", clock-1000, clock, clock) // the clock's guess sent, a lower fence granted
	if g, _ := h.guess("ahead"); g != clock-999 {
		t.Fatalf("guess after a fence below the clock's guess: %d, want the last fence plus one (%d)", g, clock-999)
	}
	at = at.Add(clockAheadFor / 2)
	h.saw("ahead", clock-999, clock-999, clock+1) // the hint's guess applied: no new 10 s
	at = at.Add(clockAheadFor / 2)                // the clock is tried again
	clock = at.Add(redisscript.FenceGuessAhead*time.Microsecond - clockGuessMargin).UnixMicro()
	if g, _ := h.guess("ahead"); g != clock {
		t.Fatalf("guess %v after a fence below the clock's guess: %d, want the clock's again (%d)", clockAheadFor, g, clock)
	}
	for i := range 3 * maxHints {
		h.saw(fmt.Sprintf("key-%d", i), clock+int64(i), clock+int64(i), clock)
	}
	if n := len(h.hint); n > maxHints {
		t.Fatalf("%d keys remembered, want at most %d", n, maxHints)
	}
	last := fmt.Sprintf("key-%d", 3*maxHints-1)
	if g, _ := h.guess(last); g != clock+3*maxHints {
		t.Fatalf("guess for the key seen last: %d, want %d", g, clock+3*maxHints)
	}
}
