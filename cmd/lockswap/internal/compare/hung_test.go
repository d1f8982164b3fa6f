package compare

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestHungServer: on real redis-server processes, both ways of hanging
// (a proxy that never answers, SIGSTOP) are measured for singleredis and
// redlock, every call returns within the declared bound (plus the
// scheduling allowance), and every server answers again afterwards.
func TestHungServer(t *testing.T) {
	testserver.NeedRedisServer(t) // SIGSTOP needs real processes
	for _, spec := range []string{"singleredis", "redlock", "redlock?restart_safety=true"} {
		t.Run(spec, func(t *testing.T) {
			col, err := ParseColumn(spec)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			e := &env{real: true}
			f, err := col.kit.setup(ctx, e, ScHung)
			if err != nil {
				t.Fatal(err)
			}
			defer f.close()
			c := runHung(ctx, f, col.Guarantees, 0)
			if c.Outcome != InTime || c.WorstOverrunMs == nil {
				t.Errorf("%s: %+v, want every call in time, with the worst overrun", spec, c)
			}
			for _, want := range []string{"no-reply:", "SIGSTOP:", "TryAcquire", "Acquire", "Extend", "Release"} {
				if !strings.Contains(c.Detail, want) {
					t.Errorf("%s: the note does not give %q: %s", spec, want, c.Detail)
				}
			}
			if err := f.alive(ctx); err != nil {
				t.Errorf("%s: a server does not answer after the scenario: %v", spec, err)
			}
		})
	}
}

// TestHungVerdict: a call that returned later than the declared bound plus
// the scheduling allowance contradicts the declaration; one within it is
// as declared; a backend that declares no bound is not run.
func TestHungVerdict(t *testing.T) {
	g := lockswap.Guarantees{Backend: "x", Nodes: 1, DeadlineOverrun: 100 * time.Millisecond}
	expected, _ := declaredOverrun(g)
	if expected != InTime {
		t.Fatalf("declared %q for a bound of 100ms, want %q", expected, InTime)
	}
	for _, c := range []struct {
		worst time.Duration
		want  Outcome
	}{
		{-50 * time.Millisecond, InTime},
		{100 * time.Millisecond, InTime},
		{300 * time.Millisecond, InTime},
		{301 * time.Millisecond, Late},
		{2 * time.Second, Late},
	} {
		got := hungOutcome(c.worst, g)
		if got != c.want {
			t.Errorf("worst overrun %v against 100ms declared: %q, want %q", c.worst, got, c.want)
		}
		if contra := contradicts(Cell{Outcome: got}, expected, g, ScHung); contra != (c.want == Late) {
			t.Errorf("worst overrun %v: contradiction = %v", c.worst, contra)
		}
	}
	if o, why := declaredOverrun(lockswap.Guarantees{}); o != NotApplicable || !strings.Contains(why, "no deadline overrun bound") {
		t.Errorf("no bound declared: %q, %q; want not applicable, saying why", o, why)
	}
}

// TestDeclaredOverrun: every default column declares lockswap.DeadlineGrace
// as its bound, and compare's scheduling allowance is the one the
// conformance fault suite adds to it.
func TestDeclaredOverrun(t *testing.T) {
	cols, err := ParseColumns(DefaultColumns)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cols {
		if c.Guarantees.DeadlineOverrun != lockswap.DeadlineGrace {
			t.Errorf("%s declares a deadline overrun of %v, want lockswap.DeadlineGrace", c.Label, c.Guarantees.DeadlineOverrun)
		}
	}
	if got := lockswap.DeadlineGrace + schedulingAllowance; got != conformance.Slack {
		t.Errorf("DeadlineGrace + compare's allowance = %v, conformance.Slack = %v: they must agree", got, conformance.Slack)
	}
}

// TestHungServerMiniredis: the fallback measures a proxy that never
// answers and says that SIGSTOP is not measured.
func TestHungServerMiniredis(t *testing.T) {
	res, err := Run(context.Background(), Options{Columns: []string{"singleredis"}, Scenarios: []string{ScHung}, Miniredis: true})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := res.Cell(ScHung, "single")
	if c.Verdict != AsDeclared || !strings.Contains(c.Detail, "no-reply:") || !strings.Contains(c.Detail, "SIGSTOP not measured") {
		t.Errorf("hung-server on miniredis = %+v, want the proxy measured, as declared, and SIGSTOP said not measured", c)
	}
}

// TestHungUnsupportedWay: a way of hanging the OS cannot do (SIGSTOP on
// Windows: servers.Redis.Pause returns an error wrapping
// errors.ErrUnsupported) is left out and said not measured, while the
// others are still measured; any other failure to hang the servers leaves
// the cell not run, with the reason.
func TestHungUnsupportedWay(t *testing.T) {
	col, err := ParseColumn("singleredis")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		err     error
		want    Outcome
		details []string
	}{
		{"unsupported", fmt.Errorf("servers: pausing a process (SIGSTOP) is not supported on plan10: %w", errors.ErrUnsupported),
			InTime, []string{"no-reply:", "paused not measured:", "not supported on plan10"}},
		{"failed", errors.New("kill: operation not permitted"),
			NotRun, []string{"paused: ", "operation not permitted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f, err := col.kit.setup(ctx, &env{}, ScHung) // miniredis
			if err != nil {
				t.Fatal(err)
			}
			defer f.close()
			offs := 0
			f.hangs = append(f.hangs, hang{name: "paused", on: func() error { return c.err }, off: func() { offs++ }})
			got := runHung(ctx, f, col.Guarantees, 0)
			if got.Outcome != c.want {
				t.Errorf("outcome %q, want %q: %+v", got.Outcome, c.want, got)
			}
			for _, want := range c.details {
				if !strings.Contains(got.Detail, want) {
					t.Errorf("the detail does not give %q: %s", want, got.Detail)
				}
			}
			if offs == 0 {
				t.Error("the failed hang was not ended")
			}
		})
	}
}
