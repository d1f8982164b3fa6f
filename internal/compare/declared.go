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
	return DeclaredBegin + "\n\n" + lockswap.MarkdownTable(Declared()...) + "\n" + DeclaredEnd
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
