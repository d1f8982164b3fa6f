package redisscript

import (
	"strconv"
	"strings"
	"testing"
)

// TestFenceGuessAheadInScript: the bound fence_guess applies is the one
// FenceGuessAhead documents.
func TestFenceGuessAheadInScript(t *testing.T) {
	want := "g <= (now or fence_clock()) + " + strconv.Itoa(FenceGuessAhead)
	if !strings.Contains(FenceCounterLua, want) {
		t.Fatalf("FenceCounterLua does not contain %q", want)
	}
}
