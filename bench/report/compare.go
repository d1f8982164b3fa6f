package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// span is one measure of a benchmark in the previous run and in the new
// one: the median over the rounds and the range (lowest, highest round).
type span struct {
	prevMed, prevLo, prevHi float64
	med, lo, hi             float64
}

// flag says whether the new median falls outside the previous range:
// above is worse (up), below is better (down), inside (or either side
// missing) is "".
func (s span) flag(up, down string) string {
	switch {
	case math.IsNaN(s.med) || math.IsNaN(s.prevLo):
		return ""
	case s.med > s.prevHi:
		return up
	case s.med < s.prevLo:
		return down
	}
	return ""
}

// compareRow is one benchmark with a base against the previous run.
type compareRow struct {
	name string // scenario/group/impl
	// isNew: the previous run has no such benchmark.
	isNew bool
	// ratio is the × base of the tables (ns/op ÷ the base's, paired
	// within each round); allocs is allocs/op.
	ratio, allocs span
}

// ratioFlag and allocsFlag are the flag columns of the row.
func (c compareRow) ratioFlag() string {
	if c.isNew {
		return "new"
	}
	return c.ratio.flag("**slower**", "faster")
}

func (c compareRow) allocsFlag() string {
	if c.isNew {
		return "new"
	}
	return c.allocs.flag("**more**", "fewer")
}

// compare pairs each benchmark of cur that has a base (floorOf) with the
// same benchmark of prev, in the order of cur's tables.
func compare(prev, cur results, order []string) []compareRow {
	var rows []compareRow
	for _, name := range order {
		parts := strings.SplitN(name, "/", 3)
		if len(parts) != 3 {
			continue
		}
		f := floorOf(parts[0], parts[1], parts[2])
		if f == "" {
			continue
		}
		base := parts[0] + "/" + parts[1] + "/" + f
		row := compareRow{name: name, isNew: len(prev[name]) == 0}
		row.ratio.med = cur.ratio(name, base, "ns/op")
		row.ratio.lo, row.ratio.hi = cur.ratioRange(name, base, "ns/op")
		row.ratio.prevMed = prev.ratio(name, base, "ns/op")
		row.ratio.prevLo, row.ratio.prevHi = prev.ratioRange(name, base, "ns/op")
		row.allocs.med = cur.med(name, "allocs/op")
		row.allocs.lo, row.allocs.hi = cur.valueRange(name, "allocs/op")
		row.allocs.prevMed = prev.med(name, "allocs/op")
		row.allocs.prevLo, row.allocs.prevHi = prev.valueRange(name, "allocs/op")
		rows = append(rows, row)
	}
	return rows
}

func rangeOf(lo, hi float64, f string) string {
	if math.IsNaN(lo) {
		return "–"
	}
	return fmt.Sprintf(f+" … "+f, lo, hi)
}

// writeComparison writes the regression guard: each benchmark with a base
// against the previous run (label says which), flagged when its new
// median is outside the previous run's range.
func writeComparison(w io.Writer, label string, prev, cur results, order []string) {
	fmt.Fprintf(w, "### Against the previous committed run\n\n")
	if len(prev) == 0 {
		fmt.Fprintf(w, "The previous run (%s) has no BenchmarkLocks lines.\n", label)
		return
	}
	fmt.Fprintf(w, "Each benchmark with a base, against the previous run (%s): *× base* as in the tables above (median of the per-round ratios) and allocs/op, each with its range over the rounds. "+
		"A row is flagged only when the new median falls outside the previous run's range: **slower** (**more** allocations) above it, faster (fewer) below it; *new*: not in the previous run.\n\n", label)
	fmt.Fprintf(w, "| benchmark | × base before | range before | × base now | range now | | allocs/op before | range before | allocs/op now | range now | |\n|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|\n")
	for _, c := range compare(prev, cur, order) {
		r, a := c.ratio, c.allocs
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.name,
			num(r.prevMed, "%.2f×"), rangeOf(r.prevLo, r.prevHi, "%.2f"), num(r.med, "%.2f×"), rangeOf(r.lo, r.hi, "%.2f"), c.ratioFlag(),
			num(a.prevMed, "%.0f"), rangeOf(a.prevLo, a.prevHi, "%.0f"), num(a.med, "%.0f"), rangeOf(a.lo, a.hi, "%.0f"), c.allocsFlag())
	}
}
