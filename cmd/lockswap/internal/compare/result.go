// Package compare runs the same fault scenarios against backend
// configurations and shows what each one measured beside what its
// Guarantees declare. It is the engine of `lockswap compare`.
package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Outcome is what a scenario measured for one column.
type Outcome string

// The outcomes.
const (
	// Held: mutual exclusion held (no second holder got in).
	Held Outcome = "held"
	// Violated: a second holder got in while the first still held (or, in
	// the slow-instance scenario, the deadline promised more than the TTL).
	Violated Outcome = "violated"
	// Available: acquire and release worked despite the fault.
	Available Outcome = "available"
	// Unavailable: acquire failed with the outage error (not contention).
	Unavailable Outcome = "unavailable"
	// Misreported: acquire failed with the wrong kind of error (for
	// example contention during an outage).
	Misreported Outcome = "misreported"
	// NotRun: nothing was measured; the verdict says whether by design or
	// because of trouble (Inconclusive).
	NotRun Outcome = "not run"
	// NotApplicable: the fault does not exist for this backend.
	NotApplicable Outcome = "n/a"
	// InTime: while the servers hung, every call returned within the
	// declared DeadlineOverrun (plus the scheduling allowance) of its
	// deadline; Late: some call returned later.
	InTime Outcome = "in time"
	Late   Outcome = "late"
)

// Verdict is how a cell's measurement compares with the declaration.
type Verdict string

// The verdicts. Only Contradiction and Inconclusive change compare's exit
// code.
const (
	// AsDeclared: the measurement is what the Guarantees declare (a kept
	// promise, or a declared weakness shown happening).
	AsDeclared Verdict = "as declared"
	// Contradiction: the measurement contradicts the declaration.
	Contradiction Verdict = "contradiction"
	// Inconclusive: nothing could be concluded (setup failed, servers
	// unreachable, the time budget ran out, too few iterations,
	// interrupted).
	Inconclusive Verdict = "inconclusive"
	// NotRunByDesign: the cell is not run on purpose (not applicable to the
	// backend, would harm the user's servers, cannot be measured faithfully
	// here); the detail says why.
	NotRunByDesign Verdict = "not run"
)

// Cell is one column's result in one scenario.
type Cell struct {
	Outcome Outcome `json:"outcome"`
	// Verdict compares Outcome with Expected.
	Verdict Verdict `json:"verdict"`
	// Expected is the outcome the column's Guarantees declare.
	Expected Outcome `json:"expected,omitempty"`
	// Declared names the Guarantees fields the expectation comes from.
	Declared string `json:"declared,omitempty"`
	// Overlaps counts critical sections that overlapped another holder.
	Overlaps int `json:"overlaps"`
	// StaleRejected and StaleAccepted count a stale holder's writes to a
	// fenced resource.
	StaleRejected int `json:"stale_rejected"`
	StaleAccepted int `json:"stale_accepted"`
	// WorstOverrunMs is, in the hung-server scenario, the longest any call
	// returned past its deadline, in milliseconds (negative: all returned
	// before it).
	WorstOverrunMs *int64 `json:"worst_overrun_ms,omitempty"`
	// Detail explains what happened, or why nothing was measured.
	Detail string `json:"detail,omitempty"`
}

// Row is one scenario across the columns.
type Row struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description"`
	// Cells are keyed by column label.
	Cells map[string]Cell `json:"cells"`
}

// Result is a whole comparison.
type Result struct {
	// Environment says which servers were used (real processes, miniredis,
	// embedded etcd, the user's own).
	Environment string   `json:"environment"`
	Columns     []Column `json:"columns"`
	Rows        []Row    `json:"rows"`
	// Interrupted: the run was cancelled; Rows hold what was measured.
	Interrupted bool `json:"interrupted,omitempty"`
}

func (r *Result) count(v Verdict) int {
	n := 0
	for _, row := range r.Rows {
		for _, c := range row.Cells {
			if c.Verdict == v {
				n++
			}
		}
	}
	return n
}

// Contradictions counts cells whose measurement contradicts the
// declaration.
func (r *Result) Contradictions() int { return r.count(Contradiction) }

// Inconclusives counts cells where nothing could be concluded.
func (r *Result) Inconclusives() int { return r.count(Inconclusive) }

// Cell returns the cell of a scenario and a column label.
func (r *Result) Cell(scenario, label string) (Cell, bool) {
	for _, row := range r.Rows {
		if row.Scenario == scenario {
			c, ok := row.Cells[label]
			return c, ok
		}
	}
	return Cell{}, false
}

// word is the cell's outcome in one short word (the legend explains it).
func (c Cell) word(scenario string) string {
	switch c.Outcome {
	case Held:
		return "held"
	case Violated:
		switch {
		case scenario == ScSlow:
			return "over"
		case c.StaleRejected > 0:
			return "fenced"
		}
		return "lost"
	case Available:
		return "up"
	case Unavailable:
		return "down"
	case Misreported:
		return "wrong"
	case NotApplicable:
		return "n/a"
	case InTime, Late:
		if c.WorstOverrunMs != nil {
			return fmt.Sprintf("%+dms", *c.WorstOverrunMs)
		}
	}
	if c.Verdict == NotRunByDesign {
		return "skip"
	}
	return ""
}

// mark is the verdict's sign (the legend explains it).
func (c Cell) mark() string {
	switch c.Verdict {
	case AsDeclared:
		if c.Outcome == Violated {
			return "!"
		}
		return "✓"
	case Contradiction:
		return "✗"
	case Inconclusive:
		return "?"
	}
	return "–"
}

// text is the cell as the table shows it: the mark and the word.
func (c Cell) text(scenario string) string {
	return strings.TrimSpace(c.mark() + " " + c.word(scenario))
}

// short is the cell for progress lines.
func (c Cell) short() string {
	return fmt.Sprintf("%s (%s)", c.Outcome, c.Verdict)
}

// legendMarks explains the marks, one line each.
var legendMarks = [][2]string{
	{"✓", "as declared: a property the configuration promises, kept"},
	{"!", "as declared: a weakness the configuration declares, shown happening"},
	{"✗", "contradiction: the measurement contradicts the declaration (exit code 3)"},
	{"?", "inconclusive: nothing could be concluded, the note says why (exit code 4 when there is no ✗)"},
	{"–", "not run, by design: the note says why; does not change the exit code"},
}

// legendWords explains the cells' words.
const legendWords = "held = one holder at a time; " +
	"lost = a second client got the lock while the first one's was still valid; " +
	"fenced = lost, but the first holder's late write was rejected by its fence; " +
	"up = acquire and release worked; " +
	"down = acquire failed with the outage error (lockswap.ErrUnavailable); " +
	"wrong = it failed with another error; " +
	"over = the lock's deadline promised more than the server grants; " +
	"+Nms (hung-server) = the latest any call returned past its deadline while the servers hung; as declared when within the column's declared deadline overrun bound plus 200 ms for scheduling on a loaded machine; " +
	"n/a = the fault does not exist for the backend; " +
	"skip = not run, by design: it would harm your own servers (--redis, --etcd) or needs real redis-server processes (the miniredis fallback)"

// tableWidth is the width the text output keeps within.
const tableWidth = 100

// WriteTable writes an aligned text table (scenarios as rows,
// configurations as columns), the legend, the numbered notes and which to
// choose, all within 100 columns for the default columns.
func (r *Result) WriteTable(w io.Writer) error {
	bw := &errWriter{w: w}
	wrap(bw, "", "  ", "servers: "+r.Environment)
	fmt.Fprintln(bw)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "SCENARIO")
	for _, c := range r.Columns {
		fmt.Fprintf(tw, "\t%s", c.Label)
	}
	fmt.Fprintln(tw)
	for i, row := range r.Rows {
		fmt.Fprintf(tw, "%d %s", i+1, row.Scenario)
		for _, c := range r.Columns {
			fmt.Fprintf(tw, "\t%s", row.Cells[c.Label].text(row.Scenario))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	lw := r.labelWidth()
	fmt.Fprintln(bw, "\nColumns (each a backend and the URL parameters set, and the servers it runs on):")
	for _, c := range r.Columns {
		wrap(bw, fmt.Sprintf("  %-*s  ", lw, c.Label), strings.Repeat(" ", lw+4), c.FullSpec+" ("+c.Servers+")")
	}
	fmt.Fprintln(bw, "\nMarks (each cell is what was measured, marked against what its column's Guarantees() declare):")
	for _, m := range legendMarks {
		wrap(bw, "  "+m[0]+"  ", "     ", m[1])
	}
	wrap(bw, "Words: ", "  ", legendWords)
	fmt.Fprintln(bw, "\nNotes:")
	for i, row := range r.Rows {
		num := fmt.Sprintf("%d. ", i+1)
		wrap(bw, num, strings.Repeat(" ", len(num)), row.Scenario+": "+row.Description)
		for _, c := range r.Columns {
			cell := row.Cells[c.Label]
			wrap(bw, fmt.Sprintf("%s%-*s  ", strings.Repeat(" ", len(num)), lw, c.Label), strings.Repeat(" ", len(num)+lw+2), cell.note(row.Scenario))
		}
	}
	if choices := r.Choose(); len(choices) > 0 {
		fmt.Fprintln(bw, "\nWhich to choose (from the measurements above):")
		for _, ch := range choices {
			wrap(bw, "  - ", "    ", ch.String())
		}
	}
	r.writeSummary(bw)
	return bw.err
}

func (r *Result) labelWidth() int {
	n := 0
	for _, c := range r.Columns {
		n = max(n, len([]rune(c.Label)))
	}
	return n
}

// note is the cell's line in the notes: the cell as the table shows it,
// what was declared where it contradicts, and the detail.
func (c Cell) note(scenario string) string {
	s := c.text(scenario)
	switch c.Verdict {
	case Contradiction:
		s += fmt.Sprintf(" (CONTRADICTION: declared %s by %s)", c.Expected, c.Declared)
	case Inconclusive:
		s += " (inconclusive)"
	}
	if c.Detail != "" {
		s += ": " + c.Detail
	}
	return s
}

func (r *Result) writeSummary(w io.Writer) {
	switch n, m := r.Contradictions(), r.Inconclusives(); {
	case r.Interrupted:
		fmt.Fprintf(w, "\nINTERRUPTED: the table shows what was measured before; %d contradiction(s), %d inconclusive\n", n, m)
	case n > 0:
		fmt.Fprintf(w, "\n%d MEASUREMENT(S) CONTRADICT THE DECLARED GUARANTEES (and %d inconclusive)\n", n, m)
	case m > 0:
		fmt.Fprintf(w, "\n%d cell(s) inconclusive; no contradiction\n", m)
	}
}

// WriteMarkdown writes the same as WriteTable in CommonMark with tables
// (GitHub's flavour): the table, the legend, the notes as a numbered list
// with one item per column, and which to choose.
func (r *Result) WriteMarkdown(w io.Writer) error {
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "Servers: %s\n\n| scenario |", mdEscape(r.Environment))
	for _, c := range r.Columns {
		fmt.Fprintf(bw, " %s |", mdEscape(c.Label))
	}
	fmt.Fprint(bw, "\n|---|")
	for range r.Columns {
		fmt.Fprint(bw, "---|")
	}
	fmt.Fprintln(bw)
	for i, row := range r.Rows {
		fmt.Fprintf(bw, "| %d %s |", i+1, row.Scenario)
		for _, c := range r.Columns {
			fmt.Fprintf(bw, " %s |", mdEscape(row.Cells[c.Label].text(row.Scenario)))
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprint(bw, "\n**Columns** (each a backend and the URL parameters set, and the servers it runs on):\n\n")
	for _, c := range r.Columns {
		fmt.Fprintf(bw, "- `%s`: `%s` (%s)\n", c.Label, c.FullSpec, mdEscape(c.Servers))
	}
	fmt.Fprint(bw, "\n**Marks** (each cell is what was measured, marked against what its column's `Guarantees()` declare):\n\n")
	for _, m := range legendMarks {
		fmt.Fprintf(bw, "- %s %s\n", m[0], mdEscape(m[1]))
	}
	fmt.Fprintf(bw, "\n**Words**: %s.\n\n**Notes**\n\n", mdEscape(legendWords))
	for i, row := range r.Rows {
		num := fmt.Sprintf("%d. ", i+1)
		fmt.Fprintf(bw, "%s**%s**: %s\n", num, row.Scenario, mdEscape(row.Description))
		for _, c := range r.Columns {
			fmt.Fprintf(bw, "%s- `%s`: %s\n", strings.Repeat(" ", len(num)), c.Label, mdEscape(row.Cells[c.Label].note(row.Scenario)))
		}
	}
	if choices := r.Choose(); len(choices) > 0 {
		fmt.Fprint(bw, "\n**Which to choose** (from the measurements above):\n\n")
		for _, ch := range choices {
			fmt.Fprintf(bw, "- %s\n", mdEscape(ch.String()))
		}
	}
	r.writeSummary(bw)
	return bw.err
}

// mdEscape keeps text from being read as markdown syntax: table pipes,
// emphasis, code and HTML.
func mdEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", "[", `\[`).Replace(s)
}

// WriteJSON writes the result as JSON, with which to choose.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*Result
		Contradictions int      `json:"contradictions"`
		Inconclusive   int      `json:"inconclusive"`
		Choose         []Choice `json:"which_to_choose"`
	}{r, r.Contradictions(), r.Inconclusives(), r.Choose()})
}

// wrap writes text after first, broken at spaces to keep lines within
// tableWidth; continuation lines start with indent. A word longer than a
// line is written whole, never cut.
func wrap(w io.Writer, first, indent, text string) {
	line, n := first, len([]rune(first))
	empty := true
	for _, word := range strings.Fields(text) {
		wl := len([]rune(word))
		if !empty && n+1+wl > tableWidth {
			fmt.Fprintln(w, line)
			line, n, empty = indent, len([]rune(indent)), true
		}
		if !empty {
			line += " "
			n++
		}
		line += word
		n += wl
		empty = false
	}
	fmt.Fprintln(w, strings.TrimRight(line, " "))
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
