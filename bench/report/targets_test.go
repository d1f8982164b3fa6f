package main

import (
	"strings"
	"testing"
)

// TestTargets31Redlock: Redlock on rueidis is judged against redsync on
// rueidis in a group whose run has it, and against redsync on redigo in
// one that does not (runs before redsync-rueidis), group by group; the
// reference rows put the floor against each redsync, in parentheses,
// with no limit or verdict.
func TestTargets31Redlock(t *testing.T) {
	serial := func(group, impl string, ns float64) string { return line("serial/"+group+"/"+impl, ns, 10) }
	var lines []string
	for _, g := range []string{"redlock3", "redlock5"} {
		lines = append(lines,
			serial(g, "floor-redigo", 70_000),
			serial(g, "lockswap-rueidis", 90_000),
			serial(g, "redsync-redigo", 100_000),
			serial(g, "redsync-goredis", 100_000))
	}
	r, _ := parseLines(append(lines, serial("redlock3", "redsync-rueidis", 120_000))...)
	var b strings.Builder
	targets31(&b, r)
	out := b.String()
	for _, s := range []string{
		"| redlock3 rueidis serial: latency ÷ redsync-rueidis | 0.750 | 0.75 … 0.75 | ≤ 0.80 | met |",
		"| (redlock3 Redlock floor serial: floor-redigo ÷ redsync-rueidis) | 0.583 | 0.58 … 0.58 | – | reference |",
		"| (redlock3 Redlock floor serial: floor-redigo ÷ redsync-redigo) | 0.700 | 0.70 … 0.70 | – | reference |",
		"| redlock5 rueidis serial: latency ÷ redsync-redigo | 0.900 | 0.90 … 0.90 | ≤ 0.80 | **missed** |",
		"| (redlock5 Redlock floor serial: floor-redigo ÷ redsync-goredis) | 0.700 | 0.70 … 0.70 | – | reference |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("targets lack %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"redlock3 rueidis serial: latency ÷ redsync-redigo", "redlock5 rueidis serial: latency ÷ redsync-rueidis", "redlock5 Redlock floor serial: floor-redigo ÷ redsync-rueidis"} {
		if strings.Contains(out, s) {
			t.Errorf("targets have %q:\n%s", s, out)
		}
	}
}
