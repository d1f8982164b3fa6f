package compare

import (
	"fmt"
	"strings"

	"github.com/lockswap/lockswap"
)

// Declared returns the Guarantees of the default columns, in column
// order, and their specs.
func Declared() (specs []string, gs []lockswap.Guarantees) {
	cols, err := ParseColumns(DefaultColumns)
	if err != nil {
		panic(err) // DefaultColumns are fixed; a test parses them
	}
	for _, c := range cols {
		specs = append(specs, "`"+c.Spec+"`")
		gs = append(gs, c.Guarantees)
	}
	return specs, gs
}

// Markers around the generated parts of docs/guarantees.md.
const (
	DeclaredBegin = "<!-- BEGIN DECLARED: generated from Guarantees() by `go generate ./...`; do not edit -->"
	DeclaredEnd   = "<!-- END DECLARED -->"
	MeasuredBegin = "<!-- BEGIN MEASURED: output of `go run ./cmd/lockswap compare --format markdown`, written by `go generate ./...` -->"
	MeasuredEnd   = "<!-- END MEASURED -->"
)

// DeclaredBlock is the declared part of docs/guarantees.md.
func DeclaredBlock() string {
	specs, gs := Declared()
	return DeclaredBegin + "\n\n" + markdownTable(specs, gs) + "\n" + DeclaredEnd
}

// Section returns the text between begin and end markers in doc,
// markers included.
func Section(doc, begin, end string) (string, error) {
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("markers %q ... %q not found", begin, end)
	}
	return doc[i : j+len(end)], nil
}

// MarkdownTable renders several backends' guarantees side by side: one
// column per backend, one row per property, then the notes. The properties
// are the lines of [lockswap.Guarantees.String], so their labels and order
// are stated once, in the root package.
func MarkdownTable(gs ...lockswap.Guarantees) string {
	headers := make([]string, len(gs))
	for i, g := range gs {
		headers[i] = g.Backend
	}
	return markdownTable(headers, gs)
}

// markdownTable is MarkdownTable with the given column headers. A note that
// several columns share is written once, after all their headers.
func markdownTable(headers []string, gs []lockswap.Guarantees) string {
	var b strings.Builder
	b.WriteString("| property |")
	for _, h := range headers {
		fmt.Fprintf(&b, " %s |", h)
	}
	b.WriteString("\n|---|")
	for range gs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	labels, _ := properties(lockswap.Guarantees{})
	values := make([][]string, len(gs))
	for i, g := range gs {
		_, values[i] = properties(g)
	}
	for r, label := range labels {
		fmt.Fprintf(&b, "| %s |", label)
		for i := range gs {
			fmt.Fprintf(&b, " %s |", values[i][r])
		}
		b.WriteString("\n")
	}
	var notes []string
	owners := map[string][]string{}
	for i, g := range gs {
		for _, n := range g.Notes {
			if _, ok := owners[n]; !ok {
				notes = append(notes, n)
			}
			owners[n] = append(owners[n], headers[i])
		}
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- %s: %s", strings.Join(owners[n], ", "), n)
	}
	if len(gs) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// properties returns the "label: value" property lines of g.String(): the
// lines after the one naming the backend and before the notes.
func properties(g lockswap.Guarantees) (labels, values []string) {
	lines := strings.Split(g.String(), "\n")
	for _, l := range lines[1:] {
		if l == "" || strings.HasPrefix(l, "note: ") {
			break
		}
		label, value, _ := strings.Cut(l, ": ")
		labels = append(labels, label)
		values = append(values, value)
	}
	return labels, values
}
