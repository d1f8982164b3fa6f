package main

import (
	"fmt"
	"strings"
	"testing"
)

// line is a benchmark line in go test's format.
func line(name string, ns, allocs float64) string {
	return fmt.Sprintf("BenchmarkLocks/%s-2 \t 1000 \t %.0f ns/op \t 4.000 cmds/op \t 100 B/op \t %.0f allocs/op\n", name, ns, allocs)
}

func parseLines(lines ...string) (results, []string) {
	return parse(strings.NewReader("goos: linux\n" + strings.Join(lines, "")))
}

func TestCompare(t *testing.T) {
	// Three previous rounds: the floor at 100 µs, each library at 1.0,
	// 1.1 and 1.2 × the floor, with 20, 21 and 22 allocs/op.
	var prevLines []string
	for i, q := range []float64{1.0, 1.1, 1.2} {
		prevLines = append(prevLines, line("serial/redis1/floor-goredis", 100000, 17))
		for _, im := range []string{"lockswap-goredis", "redislock-goredis", "redsync-goredis"} {
			prevLines = append(prevLines, line("serial/redis1/"+im, 100000*q, float64(20+i)))
		}
	}
	prev, _ := parseLines(prevLines...)
	cur, order := parseLines(
		line("serial/redis1/floor-goredis", 200000, 17),
		line("serial/redis1/lockswap-goredis", 200000*1.15, 21),        // inside the range
		line("serial/redis1/redislock-goredis", 200000*1.3, 30),        // above: slower, more allocations
		line("serial/redis1/redsync-goredis", 200000*0.9, 19),          // below: faster, fewer
		line("serial/redis1/floor-goredis-default", 200000, 17),        // a floor: no row of its own
		line("serial/redis1/lockswap-goredis-default", 200000*1.1, 40), // not in the previous run
	)
	rows := compare(prev, cur, order)
	want := []struct{ name, ratio, allocs string }{
		{"serial/redis1/lockswap-goredis", "", ""},
		{"serial/redis1/redislock-goredis", "**slower**", "**more**"},
		{"serial/redis1/redsync-goredis", "faster", "fewer"},
		{"serial/redis1/lockswap-goredis-default", "new", "new"},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.name != w.name || r.ratioFlag() != w.ratio || r.allocsFlag() != w.allocs {
			t.Errorf("row %d: %s flagged %q, %q; want %s flagged %q, %q", i, r.name, r.ratioFlag(), r.allocsFlag(), w.name, w.ratio, w.allocs)
		}
	}
	if r := rows[0].ratio; r.prevLo != 1 || r.prevHi != 1.2 || r.prevMed != 1.1 || r.med != 1.15 {
		t.Errorf("lockswap-goredis × base: previous %v (%v … %v), now %v; want 1.1 (1 … 1.2), 1.15", r.prevMed, r.prevLo, r.prevHi, r.med)
	}

	var b strings.Builder
	writeComparison(&b, "commit abc1234", prev, cur, order)
	out := b.String()
	for _, s := range []string{
		"### Against the previous committed run",
		"commit abc1234",
		"| serial/redis1/lockswap-goredis | 1.10× | 1.00 … 1.20 | 1.15× | 1.15 … 1.15 |  | 21 | 20 … 22 | 21 | 21 … 21 |  |",
		"| serial/redis1/redislock-goredis | 1.10× | 1.00 … 1.20 | 1.30× | 1.30 … 1.30 | **slower** | 21 | 20 … 22 | 30 | 30 … 30 | **more** |",
		"| serial/redis1/lockswap-goredis-default | – | – | 1.10× | 1.10 … 1.10 | new | – | – | 40 | 40 … 40 | new |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("comparison lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "| serial/redis1/floor-goredis") {
		t.Errorf("comparison has a row for a floor:\n%s", out)
	}
	if i, j := strings.Index(out, "redislock-goredis"), strings.Index(out, "redsync-goredis"); i < 0 || j < i {
		t.Errorf("rows out of the tables' order:\n%s", out)
	}
}

// TestComparePreviousEmpty: a previous file without benchmark lines says
// so instead of a table.
func TestComparePreviousEmpty(t *testing.T) {
	prev, _ := parseLines()
	cur, order := parseLines(line("serial/redis1/floor-goredis", 100000, 17), line("serial/redis1/lockswap-goredis", 110000, 20))
	var b strings.Builder
	writeComparison(&b, "x", prev, cur, order)
	if !strings.Contains(b.String(), "no BenchmarkLocks lines") {
		t.Errorf("got:\n%s", b.String())
	}
}
