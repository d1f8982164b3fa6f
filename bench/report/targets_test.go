package main

import (
	"strconv"
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

// TestTargets31Turns: BenchmarkTurns's rounds give issue 31's
// 32-goroutine targets in turns, per caller's context: the median of the
// rounds' "ratio" and their range, judged against 1.10; the A/A pair and
// the bounded floors' pairs are reference rows without a verdict; and the
// turns are in neither the scenario tables' order nor the comparison with
// an earlier run.
func TestTargets31Turns(t *testing.T) {
	turns := func(name string, ratio float64) string {
		return "BenchmarkTurns/redis1/" + name + "-2 \t 10 \t 310000000 ns/op \t 7000 floor-ns/op \t " +
			strconv.FormatFloat(ratio, 'f', 3, 64) + " ratio \t 1.3 ratio-max \t 0.9 ratio-min\n"
	}
	r, order := parseLines(
		line("parallel/redis1/floor-rueidis", 7000, 1),
		turns("cancellable/lockswap-rueidis/floor-rueidis", 1.30),
		turns("cancellable/lockswap-rueidis/floor-rueidis", 1.20),
		turns("cancellable/lockswap-rueidis/floor-rueidis", 1.40),
		turns("background/lockswap-goredis/floor-goredis", 1.05),
		turns("background/lockswap-goredis/floor-goredis", 1.09),
		turns("cancellable/floor-rueidis/floor-rueidis", 1.01),
		turns("background/bounded-rueidis/floor-rueidis", 1.25),
		turns("background/lockswap-rueidis/bounded-rueidis", 1.02),
	)
	if len(order) != 1 || order[0] != "parallel/redis1/floor-rueidis" {
		t.Errorf("order = %v, want BenchmarkLocks's name only", order)
	}
	var b strings.Builder
	targets31(&b, r)
	out := b.String()
	for _, s := range []string{
		"| singleredis rueidis parallel, in turns, cancellable caller: lockswap-rueidis ÷ floor-rueidis | 1.300 | 1.20 … 1.40 | ≤ 1.10 | **missed** |",
		"| singleredis goredis parallel, in turns, background caller: lockswap-goredis ÷ floor-goredis | 1.070 | 1.05 … 1.09 | ≤ 1.10 | met |",
		"| (A/A parallel, in turns, cancellable caller: floor-rueidis ÷ itself) | 1.010 | 1.01 … 1.01 | – | reference |",
		"| (parallel, in turns, background caller: bounded-rueidis ÷ floor-rueidis) | 1.250 | 1.25 … 1.25 | – | reference |",
		"| (parallel, in turns, background caller: lockswap-rueidis ÷ bounded-rueidis) | 1.020 | 1.02 … 1.02 | – | reference |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("targets lack %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "background caller: lockswap-rueidis ÷ floor-rueidis") {
		t.Errorf("targets have a row for a pair the run lacks:\n%s", out)
	}
}

// TestTurnsOnly: a run of BenchmarkTurns alone (no BenchmarkLocks line)
// gets the table of its pairs, and a run with neither gets nothing.
func TestTurnsOnly(t *testing.T) {
	r, order := parseLines("BenchmarkTurns/redis1/background/bounded-redigo/floor-redigo-2 \t 10 \t 310000000 ns/op \t 1.240 ratio\n")
	if len(order) != 0 {
		t.Fatalf("order = %v, want none", order)
	}
	var b strings.Builder
	if !turnsOnly(&b, r) {
		t.Fatal("turnsOnly = false for a run with turns")
	}
	if want := "| (parallel, in turns, background caller: bounded-redigo ÷ floor-redigo) | 1.240 | 1.24 … 1.24 | – | reference |"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	empty, _ := parseLines()
	b.Reset()
	if turnsOnly(&b, empty) || b.Len() != 0 {
		t.Errorf("turnsOnly wrote %q for a run without turns", b.String())
	}
}
