package compare

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestWriteBench: the table has no column that is empty when all went
// well, the legend explains every column, and a measurement that failed
// is marked in its row, named with its error after the table, and makes
// WriteBench fail (the command exits 1).
func TestWriteBench(t *testing.T) {
	rows := []BenchRow{
		{Backend: "singleredis", Mode: "serial", PerSec: 1000, P50: time.Millisecond, P99: 2 * time.Millisecond},
		{Backend: "singleredis", Mode: "contended", PerSec: 500, P50: time.Millisecond, P99: 3 * time.Millisecond, Fairness: 0.97},
	}
	var buf bytes.Buffer
	if err := WriteBench(&buf, rows, "test"); err != nil {
		t.Fatalf("WriteBench: %v", err)
	}
	out := buf.String()
	for _, want := range []string{"BACKEND", "OPS/S", "P50", "P99", "FAIRNESS", "0.97", "OPS/S: acquire+release cycles per second", "FAIRNESS, contended only"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ERROR") || strings.Contains(out, "failed") {
		t.Errorf("a run without failures shows an error column or line:\n%s", out)
	}

	rows = append(rows, BenchRow{Backend: "etcdlease", Mode: "all", Err: "etcd did not start"})
	buf.Reset()
	err := WriteBench(&buf, rows, "test")
	if err == nil || !strings.Contains(err.Error(), "1 of 3 measurements failed") {
		t.Errorf("WriteBench with a failed measurement: %v, want an error counting it", err)
	}
	if !strings.Contains(buf.String(), "failed: etcdlease all: etcd did not start") || !hasRow(buf.String(), "etcdlease", "all", "failed") {
		t.Errorf("the failed measurement is not marked in its row and named after the table:\n%s", buf.String())
	}
}

// hasRow reports whether out has a line whose first fields are fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
