package redlock

import (
	"errors"
	"strings"
	"testing"
)

// TestValidEpoch: the client's epoch check (which the acquire script
// mirrors) accepts what the script creates and refuses anything else,
// and a refusal reply from the script reads as a failure retrying cannot
// fix, with no SET to undo.
func TestValidEpoch(t *testing.T) {
	for _, e := range []string{"1732370000.123456.abcdef", "0.0.", "123456789012345678.123456789012345678.x.y"} {
		if _, _, ok := validEpoch(e); !ok {
			t.Errorf("validEpoch(%q) refused, want accepted", e)
		}
	}
	if s, u, _ := validEpoch("1732370000.000042.tag"); s != 1732370000 || u != 42 {
		t.Errorf("validEpoch: %d, %d, want 1732370000, 42", s, u)
	}
	for _, e := range []string{"", "garbage", "1.2", "1.0", "-1.0.t", "+1.0.t", " 1.0.t", "1..t", ".1.t", "1e3.0.t", "1234567890123456789.0.t", "0.1234567890123456789.t", "١.0.t"} {
		if _, _, ok := validEpoch(e); ok {
			t.Errorf("validEpoch(%q) accepted, want refused", e)
		}
	}
	set, _, _, err := parseEpochReply([]any{int64(-1), "garbage"})
	var nl *notLockError
	if set || !errors.As(err, &nl) || !isPermanent(err) || !strings.Contains(err.Error(), "not a lockswap epoch") {
		t.Errorf("refusal reply: set %v, err %v; want no SET and a permanent not-an-epoch error", set, err)
	}
	if _, _, _, err := parseEpochReply(nil); err == nil {
		t.Error("empty reply accepted")
	}
}
