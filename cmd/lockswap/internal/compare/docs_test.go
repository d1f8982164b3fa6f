package compare

import (
	"os"
	"testing"

	"github.com/lockswap/lockswap"
)

// TestGuaranteesDocUpToDate: the declared table in docs/guarantees.md is
// what Guarantees() returns. Fix with `go generate ./cmd/lockswap/internal/compare/`
// (or `go run ./cmd/lockswap/internal/gendocs -doc docs/guarantees.md -declared-only`).
func TestGuaranteesDocUpToDate(t *testing.T) {
	b, err := os.ReadFile("../../../../docs/guarantees.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Section(string(b), DeclaredBegin, DeclaredEnd)
	if err != nil {
		t.Fatal(err)
	}
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

- a: note a
`
	if got != want {
		t.Errorf("MarkdownTable changed; docs and the CLI rely on its form:\n%s\nwant:\n%s", got, want)
	}
}
