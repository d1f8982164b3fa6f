package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/memlock"
)

// TestVerdicts runs compare on real servers and checks the verdicts that
// tell the configurations apart. It asserts outcomes, never timings.
func TestVerdicts(t *testing.T) {
	testserver.NeedRedisServer(t) // failover and restart need real processes
	want := []struct {
		scenario, column string
		outcome          Outcome
		staleRejected    bool
	}{
		{ScFailover, "single+f", Violated, true},
		{ScRestart, "single+f", Violated, true},
		{ScRestart, "legacy+ms", Violated, false},
		// Plain redlock is not restart-safe; restart_safety=true is.
		{ScRestart, "redlock", Violated, false},
		{ScRestart, "redlock+f+rs", Held, false},
		// Fenced redlock: the paused holder's write is rejected.
		{ScPause, "redlock+f+rs", Violated, true},
		{ScPause, "redlock", Violated, false},
		// The holder has a bare majority and one of its masters fails
		// over: plain Redlock loses the lock (fenced: the stale write is
		// rejected); with failovers=1 it needed one grant more and holds.
		{ScFailover, "redlock", Violated, false},
		{ScFailover, "redlock+f+rs", Violated, true},
		{ScFailover, "redlock+fo=1+f+rs", Held, false},
		{ScRestart, "redlock+fo=1+f+rs", Held, false},
		{ScPause, "redlock+fo=1+f+rs", Violated, true},
		// Its price: acquire needs 4 of 5 masters, so 2 down is an outage.
		{ScMinorityDown, "redlock+fo=1+f+rs", Unavailable, false},
		{ScClockAhead, "legacy+ms", Violated, false},
		{ScClockAhead, "single+f", Held, false},
		{ScLeaderStop, "etcd", Held, false},
		{ScPause, "etcd", Violated, true},
		{ScPause, "legacy+ms", Violated, false},
		{ScMajorityDown, "single+f", Unavailable, false},
		{ScMinorityDown, "redlock", Available, false},
	}
	res, err := Run(context.Background(), Options{
		Columns:    []string{"singleredis?fence=true", "redlock", "redlock?fence=true&restart_safety=true", "redlock?failovers=1&fence=true&restart_safety=true", "legacysetnx?unit=ms", "etcdlease"},
		Scenarios:  []string{ScPause, ScClockAhead, ScRestart, ScFailover, ScMinorityDown, ScMajorityDown, ScLeaderStop},
		Iterations: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		c, ok := res.Cell(w.scenario, w.column)
		if !ok {
			t.Errorf("%s/%s: no cell", w.scenario, w.column)
			continue
		}
		if c.Outcome != w.outcome || c.Verdict != AsDeclared {
			t.Errorf("%s/%s: measured %q (%s), want %q as declared (%s)", w.scenario, w.column, c.Outcome, c.Verdict, w.outcome, c.Detail)
		}
		if w.staleRejected && c.StaleRejected == 0 {
			t.Errorf("%s/%s: the stale write was not rejected by fencing (%s)", w.scenario, w.column, c.Detail)
		}
		if !w.staleRejected && c.Outcome == Violated && w.scenario != ScClockAhead && c.StaleAccepted == 0 {
			t.Errorf("%s/%s: an unfenced configuration's stale write was not accepted (%s)", w.scenario, w.column, c.Detail)
		}
	}
	if c, _ := res.Cell(ScRestart, "etcd"); c.Verdict != NotRunByDesign || c.Outcome != NotApplicable {
		t.Errorf("etcd restart: %+v, want not run by design (not applicable)", c)
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
	cols, err := ParseColumns(DefaultColumns)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range cols {
		g := col.Guarantees
		for _, sc := range scenarios {
			expected, _ := sc.declared(g)
			if expected == NotApplicable {
				continue
			}
			wrong := Violated
			if expected == Violated {
				wrong = Held
			}
			if !contradicts(Cell{Outcome: wrong}, expected, g, sc.name) {
				t.Errorf("%s/%s: outcome %q against declared %q not flagged", sc.name, col.Label, wrong, expected)
			}
			if contradicts(Cell{Outcome: NotRun}, expected, g, sc.name) {
				t.Errorf("%s/%s: a scenario that did not run was flagged", sc.name, col.Label)
			}
			if (sc.name == ScRestart || sc.name == ScFailover) && expected == Violated {
				stale := Cell{Outcome: Violated, Overlaps: 1, StaleAccepted: 1}
				if !g.Fencing {
					stale = Cell{Outcome: Violated, Overlaps: 1, StaleRejected: 1}
				}
				if !contradicts(stale, expected, g, sc.name) {
					t.Errorf("%s/%s: fencing=%v but the stale write was %+v: not flagged", sc.name, col.Label, g.Fencing, stale)
				}
			}
		}
	}
}

// TestParseColumns: a column is a backend and its URL parameters, checked
// by the backend's own parser; its Guarantees are the configured Locker's.
func TestParseColumns(t *testing.T) {
	cols, err := ParseColumns([]string{"singleredis", "singleredis?fence=true", "redlock?restart_safety=true", "legacysetnx?unit=s", "etcdlease", "singleredis?fence=false", "singleredis"})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, c := range cols {
		labels = append(labels, c.Label)
	}
	if got, want := strings.Join(labels, " "), "single single+f redlock+rs legacy+s etcd single-f single#2"; got != want {
		t.Errorf("labels %q, want %q", got, want)
	}
	if cols[0].Guarantees.Fencing || !cols[1].Guarantees.Fencing {
		t.Errorf("fence=true must declare fencing and the default must not: %v, %v", cols[0].Guarantees.Fencing, cols[1].Guarantees.Fencing)
	}
	if !cols[2].Guarantees.SurvivesRestart || cols[2].FullSpec != "redlock?max_ttl=30s&restart_safety=true" {
		t.Errorf("restart-safe redlock: survives restart %v, full spec %q", cols[2].Guarantees.SurvivesRestart, cols[2].FullSpec)
	}
	fair, err := ParseColumn("singleredis?fair_wait=true")
	if err != nil || fair.Label != "single+fw" || fair.Guarantees.Wait == cols[0].Guarantees.Wait {
		t.Errorf("singleredis?fair_wait=true: label %q, wait %v (default %v), %v; want single+fw waiting its own way", fair.Label, fair.Guarantees.Wait, cols[0].Guarantees.Wait, err)
	}
	plain, err := ParseColumn("redlock")
	if err != nil || plain.Guarantees.SurvivesRestart || plain.Guarantees.SurvivesFailover {
		t.Errorf("plain redlock declares survives restart=%v, failover=%v (%v); want neither", plain.Guarantees.SurvivesRestart, plain.Guarantees.SurvivesFailover, err)
	}
	fo, err := ParseColumn("redlock?failovers=1")
	if err != nil || fo.Label != "redlock+fo=1" || !fo.Guarantees.SurvivesFailover || fo.Guarantees.Tolerates != 1 {
		t.Errorf("redlock?failovers=1: label %q, %+v, %v; want redlock+fo=1 surviving failover, tolerating 1 of 5", fo.Label, fo.Guarantees, err)
	}
	for _, bad := range []string{"zookeeper", "singleredis?fence=maybe", "singleredis?bogus=1", "singleredis?ttl=1s",
		"redlock?prefix=x", "legacysetnx", "legacysetnx?unit=hours", "etcdlease?ttl=5s", "singleredis?fence=true&fence=false", "singleredis?%zz", "redlock?failovers=3"} {
		if _, err := ParseColumn(bad); !errors.Is(err, ErrUsage) {
			t.Errorf("ParseColumn(%q) = %v, want an ErrUsage error", bad, err)
		} else if !strings.Contains(err.Error(), bad) && !strings.Contains(err.Error(), "zookeeper") {
			t.Errorf("ParseColumn(%q): the error does not name the column: %v", bad, err)
		}
	}
	if got, err := ShorthandColumns(BackendNames()); err != nil || len(got) != len(BackendNames()) {
		t.Errorf("ShorthandColumns(all) = %v, %v", got, err)
	}
	if _, err := ShorthandColumns([]string{"nope"}); !errors.Is(err, ErrUsage) {
		t.Errorf("ShorthandColumns(nope) = %v, want ErrUsage", err)
	}
}

// TestRunUsageMistakes: bad options are usage errors, before anything
// starts.
func TestRunUsageMistakes(t *testing.T) {
	for _, o := range []Options{
		{Scenarios: []string{"earthquake"}},
		{Columns: []string{"zookeeper"}},
		{Backends: []string{"zookeeper"}},
		{Columns: []string{"redlock"}, Backends: []string{"redlock"}},
		{Iterations: -1},
		{Budget: -time.Second},
		{Kind: "semaphore"},
	} {
		if res, err := Run(context.Background(), o); !errors.Is(err, ErrUsage) || res != nil {
			t.Errorf("Run(%+v) = %v, %v; want a usage error and no result", o, res, err)
		}
	}
}

// TestBudgetUsedUpIsInconclusive: a cell that runs out of time is
// inconclusive, never a contradiction.
func TestBudgetUsedUpIsInconclusive(t *testing.T) {
	res, err := Run(context.Background(), Options{Columns: []string{"singleredis", "legacysetnx?unit=ms"}, Scenarios: []string{ScContention, ScPause},
		Miniredis: true, Budget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		for label, c := range row.Cells {
			if c.Verdict != Inconclusive || !strings.Contains(c.Detail, "time budget") {
				t.Errorf("%s/%s with a 1ns budget: %+v, want inconclusive naming the budget", row.Scenario, label, c)
			}
		}
	}
	if res.Contradictions() != 0 || res.Inconclusives() != 4 {
		t.Errorf("%d contradictions, %d inconclusive; want 0 and 4", res.Contradictions(), res.Inconclusives())
	}
}

// cancelOnWrite cancels a context at the first progress line.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (c cancelOnWrite) Write(p []byte) (int, error) { c.cancel(); return len(p), nil }

// TestInterruptedKeepsWhatWasMeasured: a cancelled run returns the rows it
// started, its unfinished cells inconclusive.
func TestInterruptedKeepsWhatWasMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, Options{Columns: []string{"singleredis", "etcdlease"}, Scenarios: []string{ScContention, ScPause},
		Miniredis: true, Progress: cancelOnWrite{cancel}})
	if !errors.Is(err, context.Canceled) || res == nil || !res.Interrupted {
		t.Fatalf("Run cancelled: %v, %+v; want the partial result and context.Canceled", err, res)
	}
	if len(res.Rows) != 1 || len(res.Rows[0].Cells) != 2 {
		t.Fatalf("rows %+v, want the one row started", res.Rows)
	}
	for label, c := range res.Rows[0].Cells {
		if c.Verdict != Inconclusive || !strings.Contains(c.Detail, "interrupted") {
			t.Errorf("%s: %+v, want inconclusive (interrupted)", label, c)
		}
	}
}

func TestMiniredisMarksRealOnlyScenariosNotRun(t *testing.T) {
	res, err := Run(context.Background(), Options{Scenarios: []string{ScRestart, ScContention, ScPause}, Columns: []string{"singleredis?fence=true"}, Miniredis: true, Iterations: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := res.Cell(ScRestart, "single+f"); c.Verdict != NotRunByDesign || !strings.Contains(c.Detail, "real redis-server") {
		t.Errorf("restart on miniredis = %+v, want not run by design, saying why", c)
	}
	if c, _ := res.Cell(ScContention, "single+f"); c.Outcome != Held {
		t.Errorf("contention on miniredis = %+v", c)
	}
	// The paused holder's key expires on miniredis as on a real server,
	// after its TTL of wall-clock time: by then the holder's own Done has
	// fired too (it did not when the fallback jumped miniredis's clock).
	if c, _ := res.Cell(ScPause, "single+f"); c.Outcome != Violated || c.StaleRejected != 1 || c.Verdict != AsDeclared ||
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
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Rows) != 3 || back.Columns[0].Spec != "singleredis?fence=true" {
		t.Errorf("JSON output does not round-trip: %v", err)
	}
}

func goredisClient(t *testing.T, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// outageLocker is a Locker whose every attempt finds the servers
// unavailable.
type outageLocker struct{ lockswap.Locker }

func (outageLocker) TryAcquire(context.Context, string, ...lockswap.Option) (lockswap.Lock, error) {
	return nil, fmt.Errorf("0 of 5 instances answered: %w", lockswap.ErrUnavailable)
}

// TestClockAheadOutageInconclusive: when the second client of clock-ahead
// finds the servers unavailable (as a miniredis fallback under heavy load
// once did), nothing was measured: the cell is not run (inconclusive), not
// a contradiction; a refusal is held.
func TestClockAheadOutageInconclusive(t *testing.T) {
	store := memlock.NewStore()
	first := true
	f := &fixture{newLocker: func() (lockswap.Locker, error) {
		lk := memlock.New(store)
		if first {
			first = false
			return lk, nil
		}
		return outageLocker{lk}, nil
	}}
	defer f.close()
	if c := runClockAhead(context.Background(), f, lockswap.Guarantees{}, 1); c.Outcome != NotRun || !strings.Contains(c.Detail, "unavailable") {
		t.Errorf("outage: %+v, want not run, saying unavailable", c)
	}
	g := &fixture{newLocker: func() (lockswap.Locker, error) { return memlock.New(store), nil }}
	defer g.close()
	if c := runClockAhead(context.Background(), g, lockswap.Guarantees{}, 1); c.Outcome != Held {
		t.Errorf("refused: %+v, want held", c)
	}
}
