// Package compare runs the same fault scenarios against every backend and
// sets what each one measured beside what its Guarantees declare. It is the
// engine of `lockswap compare`.
package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Outcome is what a scenario measured for one backend.
type Outcome string

// The outcomes.
const (
	// Held: mutual exclusion held (no second holder got in).
	Held Outcome = "held"
	// Violated: a second holder got in while the first still held.
	Violated Outcome = "violated"
	// Available: acquire and release worked despite the fault.
	Available Outcome = "available"
	// Unavailable: acquire failed with the outage error (not contention).
	Unavailable Outcome = "unavailable"
	// Misreported: acquire failed with the wrong kind of error (for
	// example contention during an outage).
	Misreported Outcome = "misreported"
	// NotRun: the scenario needs something this run does not have (real
	// redis-server processes); it is not counted as passed.
	NotRun Outcome = "not run"
	// NotApplicable: the fault does not exist for this backend.
	NotApplicable Outcome = "n/a"
)

// Cell is one backend's result in one scenario.
type Cell struct {
	Outcome Outcome `json:"outcome"`
	// Expected is the outcome the backend's Guarantees declare.
	Expected Outcome `json:"expected,omitempty"`
	// Declared names the Guarantees field the expectation comes from.
	Declared string `json:"declared,omitempty"`
	// Overlaps counts critical sections that overlapped another holder.
	Overlaps int `json:"overlaps"`
	// StaleRejected and StaleAccepted count a stale holder's writes to a
	// fenced resource.
	StaleRejected int `json:"stale_rejected"`
	StaleAccepted int `json:"stale_accepted"`
	// Detail is a short explanation of what happened.
	Detail string `json:"detail,omitempty"`
	// Contradiction: the measurement contradicts the declaration.
	Contradiction bool `json:"contradiction"`
}

// Row is one scenario across backends.
type Row struct {
	Scenario    string          `json:"scenario"`
	Description string          `json:"description"`
	Cells       map[string]Cell `json:"cells"`
}

// Result is a whole comparison.
type Result struct {
	// Environment says which servers were used (real processes, miniredis,
	// embedded etcd, the user's own).
	Environment string   `json:"environment"`
	Backends    []string `json:"backends"`
	Rows        []Row    `json:"rows"`
}

// Contradictions counts cells whose measurement contradicts the
// declaration.
func (r *Result) Contradictions() int {
	n := 0
	for _, row := range r.Rows {
		for _, c := range row.Cells {
			if c.Contradiction {
				n++
			}
		}
	}
	return n
}

// Cell returns the cell of scenario and backend.
func (r *Result) Cell(scenario, backend string) (Cell, bool) {
	for _, row := range r.Rows {
		if row.Scenario == scenario {
			c, ok := row.Cells[backend]
			return c, ok
		}
	}
	return Cell{}, false
}

func (c Cell) text() string {
	var b strings.Builder
	b.WriteString(string(c.Outcome))
	if c.Overlaps > 0 {
		fmt.Fprintf(&b, " (%d overlap", c.Overlaps)
		if c.Overlaps > 1 {
			b.WriteString("s")
		}
		b.WriteString(")")
	}
	if c.StaleRejected > 0 {
		b.WriteString(", stale write rejected")
	} else if c.StaleAccepted > 0 {
		b.WriteString(", stale write accepted")
	}
	switch {
	case c.Contradiction:
		fmt.Fprintf(&b, " ✗ DECLARED %s", strings.ToUpper(string(c.Expected)))
	case c.Expected != "" && c.Outcome != NotRun && c.Outcome != NotApplicable:
		b.WriteString(" ✓")
	}
	return b.String()
}

// legend explains the marks of the table.
const legend = "✓ = as the backend's Guarantees() declare; ✗ = the measurement contradicts the declaration; not run = not measured in this run (its detail says why); n/a = the fault does not exist for the backend"

// WriteTable writes an aligned text table: scenarios as rows, backends as
// columns, then the details.
func (r *Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "environment: %s\n%s\n\n", r.Environment, legend)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "SCENARIO")
	for _, b := range r.Backends {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(b))
	}
	fmt.Fprintln(tw)
	for _, row := range r.Rows {
		fmt.Fprint(tw, row.Scenario)
		for _, b := range r.Backends {
			fmt.Fprintf(tw, "\t%s", row.Cells[b].text())
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeDetails(w, "")
	return nil
}

// WriteMarkdown writes the same table in markdown.
func (r *Result) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "Environment: %s\n\n%s\n\n| scenario |", r.Environment, legend)
	for _, b := range r.Backends {
		fmt.Fprintf(w, " %s |", b)
	}
	fmt.Fprint(w, "\n|---|")
	for range r.Backends {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s |", row.Scenario)
		for _, b := range r.Backends {
			fmt.Fprintf(w, " %s |", strings.ReplaceAll(row.Cells[b].text(), "|", "/"))
		}
		fmt.Fprintln(w)
	}
	r.writeDetails(w, "- ")
	return nil
}

func (r *Result) writeDetails(w io.Writer, bullet string) {
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%s%s: %s\n", bullet, row.Scenario, row.Description)
		for _, b := range r.Backends {
			if c := row.Cells[b]; c.Detail != "" {
				fmt.Fprintf(w, "%s  %s: %s\n", strings.Repeat(" ", len(bullet)), b, c.Detail)
			}
		}
	}
	if n := r.Contradictions(); n > 0 {
		fmt.Fprintf(w, "\n%d MEASUREMENT(S) CONTRADICT THE DECLARED GUARANTEES\n", n)
	}
}

// WriteJSON writes the result as JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
