package compare

import (
	"os"
	"testing"
)

// TestGuaranteesDocUpToDate: the declared table in docs/guarantees.md is
// what Guarantees() returns. Fix with `go generate ./internal/compare/`
// (or `go run ./internal/gendocs -doc docs/guarantees.md -declared-only`).
func TestGuaranteesDocUpToDate(t *testing.T) {
	b, err := os.ReadFile("../../docs/guarantees.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Section(string(b), DeclaredBegin, DeclaredEnd)
	if err != nil {
		t.Fatal(err)
	}
	if want := DeclaredBlock(); got != want {
		t.Errorf("docs/guarantees.md declared table is stale; run `go run ./internal/gendocs -doc docs/guarantees.md -declared-only`.\nhave:\n%s\nwant:\n%s", got, want)
	}
}
