package compare

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestQuarantineLogged: a restart-safe redlock column whose masters
// restart empty (fresh servers, whose epochs are unknown) meets the
// restart-safety quarantine; the wait is logged once (one Locker meets
// it), with the reason, the time left, the column and the scenario.
func TestQuarantineLogged(t *testing.T) {
	testserver.NeedRedisServer(t) // the restart needs real processes
	rec := logtest.New()
	res, err := Run(context.Background(), Options{Columns: []string{"redlock?restart_safety=true", "singleredis"},
		Scenarios: []string{ScRestart, ScMajorityDown}, Log: rec.Logger().Handler()})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Contradictions() + res.Inconclusives(); n > 0 {
		t.Errorf("%d contradictions or inconclusive cells", n)
	}
	rs := rec.Records()
	if len(rs) != 1 || rs[0].Message != redlock.MsgQuarantine {
		t.Fatalf("logged %+v, want one record: the restart-safety quarantine", rs)
	}
	for k, want := range map[string]string{"column": "redlock+rs", "scenario": ScRestart} {
		if got := rs[0].String(k); got != want {
			t.Errorf("record's %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"reason", "left"} {
		if !rs[0].Has(k) {
			t.Errorf("record %+v lacks %s", rs[0], k)
		}
	}
}

// TestOnlyMessages: compare's filter passes on the records it names,
// with the attributes added on the way, and drops the others.
func TestOnlyMessages(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(onlyMessages(slog.NewTextHandler(&buf, nil), redlock.MsgQuarantine)).With("column", "x")
	l.Warn("lock lost", "reason", "expired")
	l.Warn(redlock.MsgQuarantine, "left", "30s")
	l.WithGroup("g").Warn("release gave up")
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, redlock.MsgQuarantine) || !strings.Contains(out, "column=x") {
		t.Errorf("logged:\n%s\nwant only the quarantine, with column=x", out)
	}
}
