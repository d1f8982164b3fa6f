package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/testserver"
)

// TestVerdicts runs compare on a small budget and checks the verdicts that
// tell the backends apart. It asserts outcomes, never timings.
func TestVerdicts(t *testing.T) {
	testserver.NeedRedisServer(t) // failover and restart need real processes
	want := []struct {
		scenario, backend string
		outcome           Outcome
		staleRejected     bool
	}{
		{ScFailover, "singleredis", Violated, true},
		{ScRestart, "singleredis", Violated, true},
		{ScRestart, "legacysetnx", Violated, false},
		{ScClockAhead, "legacysetnx", Violated, false},
		{ScClockAhead, "singleredis", Held, false},
		{ScLeaderStop, "etcdlease", Held, false},
		{ScPause, "etcdlease", Violated, true},
		{ScPause, "legacysetnx", Violated, false},
		{ScMajorityDown, "singleredis", Unavailable, false},
	}
	if contains(BackendNames(), "redlock") {
		want = append(want,
			struct {
				scenario, backend string
				outcome           Outcome
				staleRejected     bool
			}{ScMinorityDown, "redlock", Available, false},
			struct {
				scenario, backend string
				outcome           Outcome
				staleRejected     bool
			}{ScFailover, "redlock", Held, false})
	}
	var scs, backends []string
	for _, w := range want {
		if !contains(scs, w.scenario) {
			scs = append(scs, w.scenario)
		}
		if !contains(backends, w.backend) {
			backends = append(backends, w.backend)
		}
	}
	res, err := Run(context.Background(), Options{Scenarios: scs, Backends: backends, Iterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		c, ok := res.Cell(w.scenario, w.backend)
		if !ok {
			t.Errorf("%s/%s: no cell", w.scenario, w.backend)
			continue
		}
		if c.Outcome != w.outcome {
			t.Errorf("%s/%s: measured %q, want %q (%s)", w.scenario, w.backend, c.Outcome, w.outcome, c.Detail)
		}
		if w.staleRejected && c.StaleRejected == 0 {
			t.Errorf("%s/%s: the stale write was not rejected by fencing (%s)", w.scenario, w.backend, c.Detail)
		}
		if !w.staleRejected && (w.scenario == ScPause || w.scenario == ScRestart) && c.StaleAccepted == 0 {
			t.Errorf("%s/%s: an unfenced backend's stale write was not accepted (%s)", w.scenario, w.backend, c.Detail)
		}
	}
	if n := res.Contradictions(); n > 0 {
		var buf bytes.Buffer
		res.WriteTable(&buf)
		t.Errorf("%d contradictions between measured and declared:\n%s", n, buf.String())
	}
}

// TestContradictionDetected: a measurement that disagrees with the
// declaration is flagged, so that compare's exit code can be trusted.
func TestContradictionDetected(t *testing.T) {
	for _, k := range kits {
		for _, sc := range scenarios {
			expected, _ := sc.declared(k.guarantees)
			if expected == NotApplicable {
				continue
			}
			wrong := Violated
			if expected == Violated {
				wrong = Held
			}
			if !contradicts(Cell{Outcome: wrong}, expected, k.guarantees, sc.name) {
				t.Errorf("%s/%s: outcome %q against declared %q not flagged", sc.name, k.name, wrong, expected)
			}
			if contradicts(Cell{Outcome: NotRun}, expected, k.guarantees, sc.name) {
				t.Errorf("%s/%s: a scenario that did not run was flagged", sc.name, k.name)
			}
			if (sc.name == ScRestart || sc.name == ScFailover) && expected == Violated {
				stale := Cell{Outcome: Violated, Overlaps: 1, StaleAccepted: 1}
				if !k.guarantees.Fencing {
					stale = Cell{Outcome: Violated, Overlaps: 1, StaleRejected: 1}
				}
				if !contradicts(stale, expected, k.guarantees, sc.name) {
					t.Errorf("%s/%s: fencing=%v but the stale write was %+v: not flagged", sc.name, k.name, k.guarantees.Fencing, stale)
				}
			}
		}
	}
}

func TestMiniredisMarksRealOnlyScenariosNotRun(t *testing.T) {
	res, err := Run(context.Background(), Options{Scenarios: []string{ScRestart, ScContention, ScPause}, Backends: []string{"singleredis"}, Miniredis: true, Iterations: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := res.Cell(ScRestart, "singleredis"); c.Outcome != NotRun || c.Contradiction {
		t.Errorf("restart on miniredis = %+v, want not run (never passed)", c)
	}
	if c, _ := res.Cell(ScContention, "singleredis"); c.Outcome != Held {
		t.Errorf("contention on miniredis = %+v", c)
	}
	// The paused holder's key expires on miniredis as on a real server,
	// after its TTL of wall-clock time: by then the holder's own Done has
	// fired too (it did not when the fallback jumped miniredis's clock).
	if c, _ := res.Cell(ScPause, "singleredis"); c.Outcome != Violated || c.StaleRejected != 1 || c.Contradiction ||
		!strings.Contains(c.Detail, "its Done had fired") {
		t.Errorf("holder pause on miniredis = %+v, want violated with the stale write rejected and Done fired", c)
	}
	if !strings.Contains(res.Environment, "miniredis") {
		t.Errorf("environment %q does not say miniredis was used", res.Environment)
	}
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Rows) != 3 {
		t.Errorf("JSON output does not round-trip: %v", err)
	}
}

func goredisClient(t *testing.T, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}
