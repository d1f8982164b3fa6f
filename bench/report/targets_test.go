package main

import (
	"strings"
	"testing"
)

// TestTargets31Redlock: Redlock on rueidis is judged against redsync on
// rueidis when the run has it, and against redsync on redigo when it does
// not (runs before redsync-rueidis); the reference rows put the floor
// against each redsync, in parentheses, and are judged by the same limit.
func TestTargets31Redlock(t *testing.T) {
	serial := func(impl string, ns float64) string { return line("serial/redlock3/"+impl, ns, 10) }
	base := []string{
		serial("floor-redigo", 70_000),
		serial("lockswap-rueidis", 90_000),
		serial("redsync-redigo", 100_000),
		serial("redsync-goredis", 100_000),
	}
	with, _ := parseLines(append(base, serial("redsync-rueidis", 120_000))...)
	var b strings.Builder
	targets31(&b, with)
	out := b.String()
	for _, s := range []string{
		"| redlock3 rueidis serial: latency ÷ redsync-rueidis | 0.750 | 0.75 … 0.75 | ≤ 0.80 | met |",
		"| (redlock3 Redlock floor serial: floor-redigo ÷ redsync-rueidis) | 0.583 | 0.58 … 0.58 | ≤ 0.80 | met |",
		"| (redlock3 Redlock floor serial: floor-redigo ÷ redsync-redigo) | 0.700 | 0.70 … 0.70 | ≤ 0.80 | met |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("targets lack %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "rueidis serial: latency ÷ redsync-redigo") {
		t.Errorf("rueidis judged against redsync on redigo although the run has redsync on rueidis:\n%s", out)
	}

	without, _ := parseLines(base...)
	b.Reset()
	targets31(&b, without)
	out = b.String()
	if s := "| redlock3 rueidis serial: latency ÷ redsync-redigo | 0.900 | 0.90 … 0.90 | ≤ 0.80 | **missed** |"; !strings.Contains(out, s) {
		t.Errorf("without redsync-rueidis, targets lack %q:\n%s", s, out)
	}
	if strings.Contains(out, "redsync-rueidis") {
		t.Errorf("a row for redsync-rueidis in a run without it:\n%s", out)
	}
}
