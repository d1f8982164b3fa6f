package compare

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/mdcheck"
)

// TestGuaranteesDocUpToDate: the declared table in docs/guarantees.md is
// what Guarantees() returns. Fix with `go generate ./cmd/lockswap/internal/compare/`
// (or `go run ./cmd/lockswap/internal/gendocs -doc docs/guarantees.md -declared-only`).
func TestGuaranteesDocUpToDate(t *testing.T) {
	got := docSection(t, DeclaredBegin, DeclaredEnd)
	if want := DeclaredBlock(); got != want {
		t.Errorf("docs/guarantees.md declared table is stale; run `go run ./cmd/lockswap/internal/gendocs -doc docs/guarantees.md -declared-only`.\nhave:\n%s\nwant:\n%s", got, want)
	}
}

func TestMarkdownTableStable(t *testing.T) {
	a := lockswap.Guarantees{Backend: "a", Fencing: true, Nodes: 1, Notes: []string{"note a"}}
	b := lockswap.Guarantees{Backend: "b", Clock: lockswap.ClockBoundedDrift, Nodes: 5, Tolerates: 2, Wait: lockswap.WaitQueue}
	got := MarkdownTable(a, b)
	want := `| property | a | b |
|---|---|---|
| fencing token | yes | no |
| exclusion survives holder pause | no | no |
| exclusion survives failover | no | no |
| exclusion survives restart without persistence | no | no |
| clock assumption | none | bounded drift |
| faults tolerated | 0 of 1 | 2 of 5 |
| stale release safe | no | no |
| wait style | poll | fifo queue |
| deadline overrun bound | none declared | none declared |
| counting semaphores | no | no |
| read-write locks | no | no |

- a: note a
`
	if got != want {
		t.Errorf("MarkdownTable changed; docs and the CLI rely on its form:\n%s\nwant:\n%s", got, want)
	}
}

// docSection returns a generated section of docs/guarantees.md.
func docSection(t *testing.T, begin, end string) string {
	t.Helper()
	b, err := os.ReadFile("../../../../docs/guarantees.md")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Section(string(b), begin, end)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMeasuredDocRenders: the measured section of docs/guarantees.md was
// generated with the current default columns, and renders as a table,
// legends and a numbered list of notes with one item per column.
func TestMeasuredDocRenders(t *testing.T) {
	got := docSection(t, MeasuredBegin, MeasuredEnd)
	cols, err := ParseColumns(DefaultColumns)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cols {
		if !strings.Contains(got, "`"+c.FullSpec+"`") {
			t.Errorf("the measured section has no column %s: regenerate it with `go generate ./cmd/lockswap/internal/compare/`", c.FullSpec)
		}
	}
	if err := mdcheck.Check([]byte(got), len(scenarios), len(cols)); err != nil {
		t.Error(err)
	}
}

// sampleResult is every scenario against the default columns, each cell
// with the widest word and a long detail full of markdown syntax.
func sampleResult(t *testing.T) *Result {
	cols, err := ParseColumns(DefaultColumns)
	if err != nil {
		t.Fatal(err)
	}
	r := &Result{Environment: "redis: test; etcd: test", Columns: cols}
	for _, sc := range scenarios {
		row := Row{Scenario: sc.name, Description: sc.description, Cells: map[string]Cell{}}
		for _, c := range cols {
			row.Cells[c.Label] = Cell{Outcome: Violated, StaleRejected: 1, Verdict: AsDeclared, Expected: Violated,
				Detail: `a long detail with a|pipe, *stars*, _under_scores_, <html> and [brackets](x) and a very-long-unbreakable-word-` + strings.Repeat("x", 40) + ` that the notes wrap at spaces but never cut, then more words to wrap`}
		}
		r.Rows = append(r.Rows, row)
	}
	return r
}

// TestTableFitsAndCutsNoWord: the text output of the default columns keeps
// within 100 columns (but for a single word longer than a line), and every
// word of a detail appears whole.
func TestTableFitsAndCutsNoWord(t *testing.T) {
	r := sampleResult(t)
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 && len(strings.Fields(line)) > 1 {
			t.Errorf("line of %d columns: %q", n, line)
		}
		for _, w := range strings.Fields(line) {
			words[w] = true
		}
	}
	for _, w := range strings.Fields(r.Rows[0].Cells["single"].Detail) {
		if !words[w] {
			t.Errorf("the word %q of a detail is not printed whole", w)
		}
	}
}

// TestMarkdownOutputRenders: markdown output renders as intended even when
// details contain markdown syntax.
func TestMarkdownOutputRenders(t *testing.T) {
	r := sampleResult(t)
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	if err := mdcheck.Check(buf.Bytes(), len(scenarios), len(r.Columns)); err != nil {
		t.Error(err)
	}
	s, _ := mdcheck.Parse(buf.Bytes())
	if strings.Contains(s.HTML, "<html>") || strings.Contains(s.HTML, "<em>") || strings.Contains(s.HTML, "<a ") {
		t.Errorf("markdown syntax in details was rendered, not escaped:\n%s", s.HTML)
	}
}

// TestChoose: "which to choose" follows the measured cells; inconclusive
// and skipped cells decide nothing.
func TestChoose(t *testing.T) {
	cols, err := ParseColumns([]string{"singleredis?fence=true", "redlock", "etcdlease"})
	if err != nil {
		t.Fatal(err)
	}
	measured := func(o Outcome, staleRejected int) Cell {
		return Cell{Outcome: o, StaleRejected: staleRejected, Verdict: AsDeclared}
	}
	na := Cell{Outcome: NotApplicable, Verdict: NotRunByDesign}
	r := &Result{Columns: cols, Rows: []Row{
		{Scenario: ScPause, Cells: map[string]Cell{"single+f": measured(Violated, 1), "redlock": measured(Violated, 0), "etcd": measured(Violated, 1)}},
		{Scenario: ScRestart, Cells: map[string]Cell{"single+f": measured(Violated, 1), "redlock": {Outcome: NotRun, Verdict: Inconclusive}, "etcd": na}},
		{Scenario: ScMinorityDown, Cells: map[string]Cell{"single+f": na, "redlock": measured(Available, 0), "etcd": measured(Available, 0)}},
	}}
	var got []string
	for _, c := range r.Choose() {
		got = append(got, c.String())
	}
	want := []string{
		"a holder that pauses past its lock must not corrupt data (stale writes rejected by a fence): single+f, etcd",
		"no second holder when servers restart without persistence: etcd (not measured: redlock)",
		"keep working while a minority of the servers is down: redlock, etcd",
		"all of these: etcd",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Choose:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
