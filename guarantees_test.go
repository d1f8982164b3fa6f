package lockswap_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockswap/lockswap"
)

func TestRequire(t *testing.T) {
	g := lockswap.Guarantees{Backend: "x", Fencing: false, Clock: lockswap.ClockSynchronized, Nodes: 3, Tolerates: 1, Wait: lockswap.WaitQueue}
	if err := g.Require(lockswap.PropFaultTolerant, lockswap.PropFair, lockswap.PropNoPolling); err != nil {
		t.Fatalf("Require of properties g has: %v", err)
	}
	err := g.Require(lockswap.PropFencing, lockswap.PropClockIndependent)
	if !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("Require of missing properties: err = %v, want ErrInvalid", err)
	}
	for _, want := range []string{"x", "fencing", "clock-independent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := g.Require("telepathy"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "telepathy") {
		t.Errorf("unknown property: err = %v, want ErrInvalid naming it", err)
	}
	for _, p := range lockswap.Properties() {
		if _, err := g.Has(p); err != nil {
			t.Errorf("Has(%q) for a listed property: %v", p, err)
		}
	}
}

func TestMarkdownTableStable(t *testing.T) {
	a := lockswap.Guarantees{Backend: "a", Fencing: true, Nodes: 1, Notes: []string{"note a"}}
	b := lockswap.Guarantees{Backend: "b", Clock: lockswap.ClockBoundedDrift, Nodes: 5, Tolerates: 2, Wait: lockswap.WaitQueue}
	got := lockswap.MarkdownTable(a, b)
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
	if s := a.String(); !strings.HasPrefix(s, "backend: a\nfencing token: yes\n") || !strings.HasSuffix(s, "note: note a\n") {
		t.Errorf("String() = %q", s)
	}
}
