package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestFutureEpochQuarantineCapped: an epoch ahead of its server's clock
// (a clock set back since the epoch was made, or a key written by
// something else) quarantines the instance for MaxTTL plus the drift
// allowance, as an epoch made just now would, not until the epoch's time
// plus MaxTTL (73 years for one of the year 2100). Numbers too large for
// a time.Duration saturate instead of overflowing. An epoch in the past
// keeps the quarantine of its age, as before.
func TestFutureEpochQuarantineCapped(t *testing.T) {
	opts := Options{RestartSafety: true, MaxTTL: time.Minute, DriftFactor: DefaultDriftFactor, DriftFixed: DefaultDriftFixed}
	p := &proto{inst: make([]instance, 1), quorum: 1, opts: opts}
	longest := opts.MaxTTL + p.drift(opts.MaxTTL)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	cases := []struct {
		name, epoch, sec, usec string
		left                   time.Duration // 0: not in quarantine
	}{
		{"year 2100", "4102444800.0.tag", now, "0", longest},
		{"one second ahead", fmt.Sprintf("%d.0.tag", time.Now().Unix()+1), now, "0", longest},
		{"largest epoch", "999999999999999999.999999999999999999.tag", now, "0", longest},
		{"largest epoch, server at 0", "999999999999999999.0.tag", "0", "0", longest},
		{"made now", now + ".0.tag", now, "0", longest},
		{"10 s old", fmt.Sprintf("%d.0.tag", time.Now().Unix()-10), now, "0", longest - 10*time.Second},
		{"older than MaxTTL", "0.0.tag", now, "0", 0},
		{"largest server clock", "0.0.tag", "999999999999999999", "999999999999999999", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.inst[0].epoch.Store(nil)
			c := &call{lk: p, res: make([]result, 1), epochs: make([]*epochState, 1)}
			c.safeReply(0, []any{int64(1), tc.epoch, tc.sec, tc.usec})
			r := c.res[0]
			if r.err != nil || r.n != 1 {
				t.Fatalf("reply read as n %d, err %v", r.n, r.err)
			}
			if r.quarantined != (tc.left > 0) || r.left != tc.left {
				t.Fatalf("quarantined %v for %v; want %v for %v (MaxTTL %v plus drift is %v)", r.quarantined, r.left, tc.left > 0, tc.left, opts.MaxTTL, longest)
			}
		})
	}
}
