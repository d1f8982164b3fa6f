package fencemodel

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The bounds of the runs (docs/redlock-fencing.md gives their state counts):
//
//   - smallBounds: the default under -race, and the bounds the broken
//     variants are explored with (their counterexamples are short);
//   - quickBounds: the default without -race;
//   - deepBounds: LOCKSWAP_FENCEMODEL_DEEP=1 (minutes).
var (
	smallBounds = Bounds{Clients: 2, Retransmissions: 0, Losses: 0, Ticks: 0}
	quickBounds = Bounds{Clients: 2, Retransmissions: 0, Losses: 1, Ticks: 0}
	deepBounds  = []Bounds{
		{Clients: 2, Retransmissions: 1, Losses: 1, Ticks: 1},
		{Clients: 3, Retransmissions: 0, Losses: 0, Ticks: 0},
	}
)

func boundsForRun() []Bounds {
	switch {
	case os.Getenv("LOCKSWAP_FENCEMODEL_DEEP") == "1":
		return deepBounds
	case raceEnabled:
		return []Bounds{smallBounds}
	}
	return []Bounds{quickBounds}
}

// TestProtocolHasNoCounterexample explores every state of the protocol
// within the bounds and finds no fence given twice and none out of order.
func TestProtocolHasNoCounterexample(t *testing.T) {
	for _, b := range boundsForRun() {
		for _, v := range []Variant{Protocol, ProtocolHoldCheck, ProtocolFastPath} {
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

// TestBrokenVariantsHaveCounterexamples runs the explorer on the rules the
// protocol was chosen over: each must break a property, and the shortest
// way it does is logged.
func TestBrokenVariantsHaveCounterexamples(t *testing.T) {
	withLoss := smallBounds
	withLoss.Losses = 1
	for _, tc := range []struct {
		v    Variant
		b    Bounds
		prop string
	}{
		{NaiveRead, smallBounds, "unique"},
		{NaiveIncr, smallBounds, "unique"},
		{SketchHeldNoCAS, smallBounds, "unique"},
		{NoRestartSeed, withLoss, "unique"},
		{UnconditionalWriteBack, smallBounds, "unique"},
		{FastPathNoCAS, smallBounds, "unique"},
	} {
		t.Run(tc.v.Name, func(t *testing.T) {
			m := Model{V: tc.v, B: tc.b}
			r := m.Explore()
			t.Logf("%s, %+v: %d states, %d transitions, depth %d", tc.v.Name, m.B, r.States, r.Transitions, r.Depth)
			if r.Violation == nil {
				t.Fatalf("no counterexample found (complete: %v): the explorer misses what it must find", r.Complete)
			}
			t.Logf("%s violated: %s\n%s", r.Violation.Property, r.Violation.Detail, strings.Join(r.Trace, "\n"))
			if r.Violation.Property != tc.prop {
				t.Errorf("violated %s, want %s", r.Violation.Property, tc.prop)
			}
			if len(r.Trace) < 2 || !strings.Contains(r.Trace[len(r.Trace)-1], "violated") {
				t.Errorf("trace does not end in the violation:\n%s", strings.Join(r.Trace, "\n"))
			}
			if tc.v == NoRestartSeed && !slices.ContainsFunc(r.Trace, func(l string) bool {
				return strings.Contains(l, "restarts") || strings.Contains(l, "evicts")
			}) {
				// Without a loss, this variant is the protocol.
				t.Errorf("the counterexample has no counter loss in it")
			}
		})
	}
}

// issueScript is the counterexample of the issue, step by step: X, Y, Z
// are instances 0, 1, 2; A and B clients 0 and 1.
func issueScript() []Action {
	const A, B = 0, 1
	const X, Y, Z = 0, 1, 2
	return []Action{
		{Kind: ActStart, Client: B},
		{Kind: ActDeliverGrant, Client: B, Instance: Y}, // B's SET reaches only Y; its reply is delayed
		{Kind: ActExpire, Instance: Y},                  // B's key on Y expires
		{Kind: ActStart, Client: A},
		{Kind: ActDeliverGrant, Client: A, Instance: X},
		{Kind: ActDeliverGrant, Client: A, Instance: Y},
		{Kind: ActDeliverGrant, Client: A, Instance: Z},          // Z's reply is lost
		{Kind: ActDecide, Client: A, Value: 1, Set: 1<<X | 1<<Y}, // v = 1 from X, Y
		{Kind: ActDeliverWriteBack, Client: A, Instance: Y},      // write-back lands on Y
		{Kind: ActDeliverWriteBack, Client: A, Instance: Z},      // and Z (X's is delayed)
		{Kind: ActReturn, Client: A, Set: 1<<Y | 1<<Z},           // A returns 1
		{Kind: ActExpire, Instance: X},                           // A releases
		{Kind: ActExpire, Instance: Y},                           //
		{Kind: ActExpire, Instance: Z},                           //
		{Kind: ActDeliverGrant, Client: B, Instance: X},          // B's delayed SETs land on X (counter 0)
		{Kind: ActDeliverGrant, Client: B, Instance: Z},          // and Z (counter 1, reply lost)
		{Kind: ActDecide, Client: B, Value: 1, Set: 1<<X | 1<<Y}, // v = 1 from X, Y
		{Kind: ActDeliverWriteBack, Client: B, Instance: X},      // where B holds K
		{Kind: ActDeliverWriteBack, Client: B, Instance: Z},      // where B holds K
		{Kind: ActReturn, Client: B, Set: 1<<X | 1<<Z},           // B returns 1: twice
	}
}

// replay runs a script on m from the initial state, each step required to
// be enabled, and stops at the first step that is not or that breaks a
// property. It returns the trace, the violation and how many steps ran.
func replay(t *testing.T, m *Model, script []Action) ([]string, *Violation, int) {
	t.Helper()
	s := initial()
	var lines []string
	for k, a := range script {
		enabled := slices.ContainsFunc(m.actions(&s, nil), func(e Action) bool {
			if e.Kind == ActDecide || e.Kind == ActReturn {
				// A decision is named by its v; a return is one step
				// whichever majority it counts.
				return e.Kind == a.Kind && e.Client == a.Client && e.Value == a.Value
			}
			return e == a
		})
		if !enabled {
			return lines, nil, k
		}
		desc, v := m.apply(&s, a, true)
		lines = append(lines, desc)
		if v != nil {
			return lines, v, k + 1
		}
	}
	return lines, nil, len(script)
}

// TestIssueCounterexample replays the issue's counterexample: under the
// sketch (write-back where K is held, no compare) it gives fence 1 twice;
// under the protocol, B's write-back on Z meets C = 1 and replies 0, so B
// cannot return 1.
func TestIssueCounterexample(t *testing.T) {
	script := issueScript()
	b := Bounds{Clients: 2}

	m := Model{V: SketchHeldNoCAS, B: b}
	lines, v, n := replay(t, &m, script)
	if v == nil || v.Property != "unique" || n != len(script) {
		t.Fatalf("sketch: ran %d of %d steps, violation %v\n%s", n, len(script), v, strings.Join(lines, "\n"))
	}
	t.Logf("sketch: %s\n%s", v.Detail, strings.Join(lines, "\n"))

	for _, variant := range []Variant{Protocol, ProtocolHoldCheck} {
		m := Model{V: variant, B: b}
		lines, v, n := replay(t, &m, script)
		// Every step up to B's write-back runs; B's return is not enabled.
		if v != nil || n != len(script)-1 {
			t.Fatalf("%s: ran %d of %d steps, violation %v\n%s", variant.Name, n, len(script), v, strings.Join(lines, "\n"))
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "lands on Z") || !strings.Contains(last, "replies 0") {
			t.Fatalf("%s: B's write-back on Z: %s", variant.Name, last)
		}
	}
}

// TestExploreIsDeterministic: two runs give the same counts and trace.
func TestExploreIsDeterministic(t *testing.T) {
	m1 := Model{V: UnconditionalWriteBack, B: smallBounds}
	m2 := Model{V: UnconditionalWriteBack, B: smallBounds}
	r1, r2 := m1.Explore(), m2.Explore()
	if r1.States != r2.States || r1.Transitions != r2.Transitions || !slices.Equal(r1.Trace, r2.Trace) {
		t.Fatalf("runs differ: %d/%d states, %d/%d transitions\n%s\n--\n%s", r1.States, r2.States, r1.Transitions, r2.Transitions,
			strings.Join(r1.Trace, "\n"), strings.Join(r2.Trace, "\n"))
	}
}
