package compare

import (
	"fmt"
	"strings"

	"github.com/lockswap/lockswap"
)

// Declared returns every compared backend's Guarantees, in column order.
func Declared() []lockswap.Guarantees {
	out := make([]lockswap.Guarantees, len(kits))
	for i, k := range kits {
		out[i] = k.guarantees
	}
	return out
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
	return DeclaredBegin + "\n\n" + MarkdownTable(Declared()...) + "\n" + DeclaredEnd
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
	var b strings.Builder
	b.WriteString("| property |")
	for _, g := range gs {
		fmt.Fprintf(&b, " %s |", g.Backend)
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
	for _, g := range gs {
		for _, n := range g.Notes {
			fmt.Fprintf(&b, "\n- %s: %s", g.Backend, n)
		}
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
