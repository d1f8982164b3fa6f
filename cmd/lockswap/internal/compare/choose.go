package compare

import (
	"fmt"
	"strings"
)

// A need is something a user may require of a lock, judged from the cells
// of some scenarios.
type need struct {
	text      string
	scenarios []string
	// good says whether a measured cell meets the need.
	good func(c Cell) bool
	// naMeets: a column for which the fault does not exist meets the need
	// (etcd never restarts empty); otherwise such a cell says nothing.
	naMeets bool
}

var needs = []need{
	{text: "a holder that pauses past its lock must not corrupt data (stale writes rejected by a fence)",
		scenarios: []string{ScPause}, good: func(c Cell) bool { return c.Outcome == Held || c.StaleRejected > 0 }},
	{text: "no second holder when a server fails over",
		scenarios: []string{ScFailover, ScLeaderStop}, good: func(c Cell) bool { return c.Outcome == Held }},
	{text: "no second holder when servers restart without persistence",
		scenarios: []string{ScRestart}, good: func(c Cell) bool { return c.Outcome == Held }, naMeets: true},
	{text: "clients' wall clocks may disagree",
		scenarios: []string{ScClockAhead}, good: func(c Cell) bool { return c.Outcome == Held }},
	{text: "keep working while a minority of the servers is down",
		scenarios: []string{ScMinorityDown}, good: func(c Cell) bool { return c.Outcome == Available }},
}

// Choice is one line of "which to choose": the columns that were measured
// to meet a need, and those the run could not tell.
type Choice struct {
	Need    string   `json:"need"`
	Columns []string `json:"columns"`
	// Unknown are columns not measured in the need's scenarios
	// (inconclusive or not run).
	Unknown []string `json:"unknown,omitempty"`
}

// String is the choice as a sentence.
func (c Choice) String() string {
	s := c.Need + ": "
	if len(c.Columns) == 0 {
		s += "none of these columns"
	} else {
		s += strings.Join(c.Columns, ", ")
	}
	if len(c.Unknown) > 0 {
		s += fmt.Sprintf(" (not measured: %s)", strings.Join(c.Unknown, ", "))
	}
	return s
}

// Choose derives which configuration to choose for which need from the
// measured cells (as declared or contradiction; an inconclusive or skipped
// cell decides nothing), and ends with the columns that meet every need.
func (r *Result) Choose() []Choice {
	var out []Choice
	meetsAll := map[string]bool{}
	for _, c := range r.Columns {
		meetsAll[c.Label] = true
	}
	for _, n := range needs {
		var rows []Row
		for _, row := range r.Rows {
			if contains(n.scenarios, row.Scenario) {
				rows = append(rows, row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		ch := Choice{Need: n.text}
		for _, col := range r.Columns {
			measured, bad, na := 0, false, false
			for _, row := range rows {
				c := row.Cells[col.Label]
				switch {
				case c.Outcome == NotApplicable:
					na = true
				case c.Verdict == AsDeclared || c.Verdict == Contradiction:
					measured++
					bad = bad || !n.good(c)
				}
			}
			switch {
			case bad:
				meetsAll[col.Label] = false
			case measured > 0 || (na && n.naMeets):
				ch.Columns = append(ch.Columns, col.Label)
			case na:
				meetsAll[col.Label] = false
			default:
				ch.Unknown = append(ch.Unknown, col.Label)
				meetsAll[col.Label] = false
			}
		}
		out = append(out, ch)
	}
	if len(out) > 1 {
		all := Choice{Need: "all of these"}
		for _, c := range r.Columns {
			if meetsAll[c.Label] {
				all.Columns = append(all.Columns, c.Label)
			}
		}
		out = append(out, all)
	}
	return out
}
