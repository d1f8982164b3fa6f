package redisscript

import (
	"strconv"
	"strings"
	"testing"
)

// TestFenceGuessAheadInScript: the bound fence_guess applies and the lead
// of fence_seed are the one FenceGuessAhead documents.
func TestFenceGuessAheadInScript(t *testing.T) {
	for _, want := range []string{
		"g <= (now or fence_clock()) + " + strconv.Itoa(FenceGuessAhead),
		"return now + " + strconv.Itoa(FenceGuessAhead),
	} {
		if !strings.Contains(FenceCounterLua, want) {
			t.Fatalf("FenceCounterLua does not contain %q", want)
		}
	}
}
