package historyrun

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesis"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestJudge: a verdict follows the Guarantees. With fences any violation
// contradicts them; without, a lost update is the declared weakness only
// when the schedule drew what the Guarantees say breaks exclusion, and a
// contradiction otherwise; an undecided key is inconclusive, never a pass.
func TestJudge(t *testing.T) {
	lease := lockswap.Guarantees{Fencing: true, Clock: lockswap.ClockBoundedDrift}
	legacy := lockswap.Guarantees{Clock: lockswap.ClockSynchronized}
	survivor := lockswap.Guarantees{Fencing: true, SurvivesHolderPause: true, SurvivesRestart: true, SurvivesFailover: true}
	lost := history.Result{Violations: []string{"a"}}
	ok := history.Result{Linearizable: true}
	restart := []nemesis.Event{{Fault: "delay the server by 20 ms"}, {Fault: "restart the server without its data"}}
	jump := []nemesis.Event{{Fault: "jump client 1's clock ahead by 2s"}}
	for _, c := range []struct {
		name   string
		g      lockswap.Guarantees
		fenced bool
		res    history.Result
		late   bool
		drew   []nemesis.Event
		want   Verdict
	}{
		{"fenced, linearizable", lease, true, ok, true, restart, Holds},
		{"fenced, lost update", lease, true, lost, true, restart, Contradicted},
		{"fenced, fences out of order", lease, true, history.Result{Linearizable: true, Fences: []string{"x"}}, false, nil, Contradicted},
		{"plain, lost update after a late holder", lease, false, lost, true, nil, WeaknessShown},
		{"plain, lost update after a restart", lease, false, lost, false, restart, WeaknessShown},
		{"plain, lost update after a failover", lease, false, lost, false, []nemesis.Event{{Fault: "fail master 1 over to a replica without its recent writes"}}, WeaknessShown},
		{"plain, lost update after a clock jump, clocks must agree", legacy, false, lost, false, jump, WeaknessShown},
		{"plain, lost update after a clock jump, drift bounded", lease, false, lost, false, jump, Contradicted},
		{"plain, lost update and nothing that explains it", lease, false, lost, false, restart[:1], Contradicted},
		{"plain, lost update a backend says it survives", survivor, false, lost, true, restart, Contradicted},
		{"plain, linearizable", lease, false, ok, true, restart, Holds},
		{"undecided", lease, true, history.Result{Unknown: []string{"a"}}, false, nil, Inconclusive},
	} {
		if got, why := judge(c.g, c.fenced, c.res, c.late, c.drew); got != c.want || why == "" {
			t.Errorf("%s: %s (%q), want %s", c.name, got, why, c.want)
		}
	}
	if ExitCode([]Result{{Verdict: Holds}, {Verdict: WeaknessShown}}) != 0 ||
		ExitCode([]Result{{Verdict: Inconclusive}, {Verdict: Holds}}) != 4 ||
		ExitCode([]Result{{Verdict: Inconclusive}, {Verdict: Contradicted}}) != 3 {
		t.Error("ExitCode: want 0 for holds and declared weaknesses, 4 for inconclusive, 3 for a contradiction first")
	}
}

// TestRunFencedSingleRedis runs the fenced singleredis configuration for
// two seconds under its nemesis: the history must hold, sections must have
// run, and the report names the configuration, its seed and its verdict.
// The plain one runs beside it: its lost updates, when the schedule causes
// them, are the declared weakness, never a contradiction, and their
// history and views are written to Out.
func TestRunFencedSingleRedis(t *testing.T) {
	testserver.NeedRedisServer(t)
	cs, err := Select(Configs(), []string{"singleredis*"})
	if err != nil || len(cs) != 2 {
		t.Fatalf("Select: %v, %v", cs, err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := Run(ctx, Options{Configs: cs, Duration: 2 * time.Second, Clients: 4, Seed: 7, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Config != "singleredis" || rs[1].Config != "singleredis+fence" || rs[0].Seed != 7 || rs[1].Seed != 8 {
		t.Fatalf("results %+v", rs)
	}
	plain, fenced := rs[0], rs[1]
	if fenced.Verdict != Holds || fenced.Sections == 0 || len(fenced.Files) != 0 {
		t.Errorf("fenced singleredis: %s (%s), %d sections, files %v; want it to hold", fenced.Verdict, fenced.Why, fenced.Sections, fenced.Files)
	}
	if plain.Verdict == Contradicted || plain.Verdict == Inconclusive {
		t.Errorf("plain singleredis: %s: %s", plain.Verdict, plain.Why)
	}
	if plain.Verdict == WeaknessShown {
		if len(plain.Files) < 2 {
			t.Errorf("a declared weakness shown wrote %v, want the history and a view per failing key", plain.Files)
		}
		for _, f := range plain.Files {
			if !strings.HasPrefix(f, out) {
				t.Errorf("wrote %s outside Out %s", f, out)
			}
			if b, err := os.ReadFile(f); err != nil || len(b) == 0 {
				t.Errorf("%s: %v, %d bytes", f, err, len(b))
			}
		}
		ops, err := readHistory(filepath.Join(filepath.Dir(plain.Files[0]), "history.jsonl"))
		if err != nil || len(ops) != plain.Sections {
			t.Errorf("the written history: %d ops, %v; want %d, readable", len(ops), err, plain.Sections)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, rs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"singleredis+fence", "holds", "8", "faults drawn"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	t.Logf("report:\n%s", b.String())
}

func readHistory(path string) ([]history.Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return history.ReadJSONL(f)
}

// TestSelect: patterns select configurations in their order, once each;
// a pattern that matches nothing, or is malformed, is an error.
func TestSelect(t *testing.T) {
	cs, err := Select(Configs(), []string{"*+fence", "singleredis*"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "singleredis+fence,redlock3+fence,redlock5+fence,etcdlease+fence,singleredis" {
		t.Errorf("selected %s", got)
	}
	for _, bad := range []string{"nope", "["} {
		if _, err := Select(Configs(), []string{bad}); err == nil {
			t.Errorf("Select(%q) accepted", bad)
		}
	}
}
