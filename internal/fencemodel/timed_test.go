package fencemodel

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The bounds of the timed runs (docs/redlock-fencing.md gives their state
// counts and times). In all of them the instances' clocks agree within
// Skew, a restarted instance is down for Skew + 1 ticks and a counter is
// evicted only Skew + 1 ticks after the last compare-and-set (A3's
// premise), and at most one fence is computed per tick (A3's rate):
//
//   - timedSmall: the default under -race, a smoke run of the explorer
//     (one tick: the race detector slows the single-goroutine search
//     about fifty times, and CI runs the default bounds without it);
//   - timedQuick: the default without -race: 3 clients with the fast path;
//   - timedDeep: LOCKSWAP_FENCEMODEL_DEEP=1.
var (
	timedSmall = Bounds{Clients: 2, Losses: 1, Time: Timing{On: true, Skew: 0, ClientSkew: 0, Margin: 1, Downtime: 1, Gap: 1, Rate: 1, Ticks: 1}}
	timedQuick = []Bounds{
		{Clients: 3, Losses: 1, Time: Timing{On: true, Skew: 0, ClientSkew: 1, Margin: 1, Downtime: 1, Gap: 1, Rate: 1, Ticks: 2}},
		{Clients: 2, Losses: 1, Time: Timing{On: true, Skew: 1, ClientSkew: 1, Margin: 1, Downtime: 2, Gap: 2, Rate: 1, Ticks: 2}},
	}
	timedDeep = []Bounds{
		{Clients: 2, Losses: 1, Time: Timing{On: true, Skew: 1, ClientSkew: 0, Margin: 1, Downtime: 2, Gap: 2, Rate: 1, Ticks: 3}},
		{Clients: 3, Losses: 1, Time: Timing{On: true, Skew: 1, ClientSkew: 0, Margin: 1, Downtime: 2, Gap: 2, Rate: 1, Ticks: 2}},
	}
	// timedBroken: the bounds the broken timed variants are explored
	// with: the protocol's premise holds, their counterexamples are short.
	timedBroken = Bounds{Clients: 2, Losses: 1, Time: Timing{On: true, Skew: 0, ClientSkew: 1, Margin: 1, Downtime: 1, Gap: 1, Rate: 1, Ticks: 2}}
)

func timedBoundsForRun() []Bounds {
	switch {
	case os.Getenv("LOCKSWAP_FENCEMODEL_DEEP") == "1":
		return timedDeep
	case raceEnabled:
		return []Bounds{timedSmall}
	}
	return timedQuick
}

// TestTimedProtocolHasNoCounterexample: with per-instance clocks, seeds at
// clock + L, the guess bound, and losses at any step under A3's premise,
// the protocol gives no fence twice and none out of order.
func TestTimedProtocolHasNoCounterexample(t *testing.T) {
	for _, b := range timedBoundsForRun() {
		for _, v := range []Variant{LeadProtocol} {
			t.Run(v.Name, func(t *testing.T) {
				m := Model{V: v, B: b}
				r := m.Explore()
				t.Logf("%s, %+v: %d states, %d transitions, depth %d, complete %v", v.Name, m.B, r.States, r.Transitions, r.Depth, r.Complete)
				if r.Violation != nil {
					t.Fatalf("%s violated: %s\n%s", r.Violation.Property, r.Violation.Detail, strings.Join(r.Trace, "\n"))
				}
				if !r.Complete {
					t.Fatalf("exploration cut short at depth %d: the bounds were not covered", r.Depth)
				}
			})
		}
	}
}

// TestTimedBrokenVariantsHaveCounterexamples: the rules the seed's lead and
// the guess bound replaced break a property under the protocol's premise,
// and the protocol itself breaks when the premise does (a downtime or an
// eviction gap not above the clocks' skew).
func TestTimedBrokenVariantsHaveCounterexamples(t *testing.T) {
	shortDown := timedBroken
	shortDown.Time.Downtime, shortDown.Time.Gap = 0, 9 // and no eviction
	shortGap := timedBroken
	shortGap.Time.Downtime, shortGap.Time.Gap = 9, 0 // and no restart comes back
	for _, tc := range []struct {
		name string
		v    Variant
		b    Bounds
		loss string // the loss the counterexample must contain
		slow bool   // skipped under -race (seconds without it)
	}{
		{"(f)", SeedNoLead, timedBroken, "", false},
		{"(g)", GuessPastLead, timedBroken, "", false},
		{"downtime = skew", LeadProtocol, shortDown, "restarts", true},
		{"eviction gap = skew", LeadProtocol, shortGap, "evicts", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.slow && raceEnabled {
				t.Skip("a minute under -race; run without -race")
			}
			m := Model{V: tc.v, B: tc.b}
			r := m.Explore()
			t.Logf("%s, %+v: %d states, %d transitions, depth %d", tc.v.Name, m.B, r.States, r.Transitions, r.Depth)
			if r.Violation == nil {
				t.Fatalf("no counterexample found (complete: %v)", r.Complete)
			}
			t.Logf("%s violated: %s\n%s", r.Violation.Property, r.Violation.Detail, strings.Join(r.Trace, "\n"))
			if len(r.Trace) < 2 || !strings.Contains(r.Trace[len(r.Trace)-1], "violated") {
				t.Errorf("trace does not end in the violation:\n%s", strings.Join(r.Trace, "\n"))
			}
			if !slices.ContainsFunc(r.Trace, func(l string) bool {
				return strings.Contains(l, "restarts") || strings.Contains(l, "evicts")
			}) {
				t.Errorf("the counterexample has no counter loss in it")
			}
			if tc.loss != "" && !slices.ContainsFunc(r.Trace, func(l string) bool { return strings.Contains(l, tc.loss) }) {
				t.Errorf("the counterexample has no step that %s", tc.loss)
			}
		})
	}
}

// orderScript: under (f), A (its clock a tick fast) has its guess 3
// applied on X and Y, seeded at the bare clock 0, returns fence 3 and
// releases; a tick later X evicts its counter; B, started after A returned, its
// clock a tick slow, guesses 2, which X (re-seeded at its clock, 1) and Z
// (seeded at 1) accept as C + 1: B returns fence 2 < 3.
func orderScript() []Action {
	const A, B = 0, 1
	const X, Y, Z = 0, 1, 2
	return []Action{
		{Kind: ActClocks, Value: 0}, // every clock at R
		{Kind: ActStart, Client: A, Value: 3},
		{Kind: ActDeliverGrant, Client: A, Instance: X},
		{Kind: ActDeliverGrant, Client: A, Instance: Y},
		{Kind: ActReturnFast, Client: A, Set: 1<<X | 1<<Y},
		{Kind: ActExpire, Instance: X}, // A releases
		{Kind: ActExpire, Instance: Y},
		{Kind: ActTick},
		{Kind: ActEvict, Instance: X},
		{Kind: ActStart, Client: B, Value: 2},
		{Kind: ActDeliverGrant, Client: B, Instance: X},
		{Kind: ActDeliverGrant, Client: B, Instance: Z},
		{Kind: ActReturnFast, Client: B, Set: 1<<X | 1<<Z},
	}
}

// TestTimedOrderViolation shows the Ordered check firing: under (f) the
// history of orderScript gives B, which started after A returned 3, fence
// 2, reported as an order violation (fences 3 and 2 are distinct: Unique
// holds). Under the protocol the seeds lead the clock by L = 3: A's guess 3
// is not above them, and A cannot return it.
func TestTimedOrderViolation(t *testing.T) {
	b := Bounds{Clients: 2, Losses: 1, Time: Timing{On: true, Skew: 0, ClientSkew: 1, Margin: 1, Downtime: 1, Gap: 1, Rate: 1}}
	script := orderScript()

	m := Model{V: SeedNoLead, B: b}
	lines, v, n := replay(t, &m, script)
	if v == nil || v.Property != "ordered" || n != len(script) {
		t.Fatalf("(f): ran %d of %d steps, violation %v\n%s", n, len(script), v, strings.Join(lines, "\n"))
	}
	t.Logf("(f): %s\n%s", v.Detail, strings.Join(lines, "\n"))

	// Under the protocol the seed (0 + L = 3) is not below A's guess:
	// A cannot return 3 by the fast path, and the script stops there.
	m = Model{V: LeadProtocol, B: b}
	lines, v, n = replay(t, &m, script)
	if v != nil || n != 4 {
		t.Fatalf("protocol: ran %d of %d steps, violation %v\n%s", n, len(script), v, strings.Join(lines, "\n"))
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "C seeded 3") || strings.Contains(last, "applied") {
		t.Fatalf("protocol: A's acquire on Y: %s", last)
	}
}
