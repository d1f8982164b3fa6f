// Command report reads the output of BenchmarkLocks (go test -bench, any
// -count) on stdin and writes markdown: one table per scenario and group
// with medians over the rounds, the spread of ns/op, ratios to the floor
// (or reference library) paired round by round, and the targets of issue 8
// with met / missed.
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// sample is one benchmark result line: unit -> value.
type sample map[string]float64

// results maps scenario/group/impl to its samples, one per round, in order.
type results map[string][]sample

var lineRE = regexp.MustCompile(`^BenchmarkLocks/(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func parse(r io.Reader) (results, []string) {
	res := results{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		s := sample{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				s[f[i+1]] = v
			}
		}
		if _, ok := res[m[1]]; !ok {
			order = append(order, m[1])
		}
		res[m[1]] = append(res[m[1]], s)
	}
	return res, order
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (r results) values(name, unit string) []float64 {
	var v []float64
	for _, s := range r[name] {
		if x, ok := s[unit]; ok {
			v = append(v, x)
		}
	}
	return v
}

func (r results) med(name, unit string) float64 { return median(r.values(name, unit)) }

// ratio is the median over rounds of a's unit ÷ b's unit, each round's
// pair measured next to each other.
func (r results) ratio(a, b, unit string) float64 {
	va, vb := r.values(a, unit), r.values(b, unit)
	n := min(len(va), len(vb))
	var q []float64
	for i := range n {
		if vb[i] != 0 {
			q = append(q, va[i]/vb[i])
		}
	}
	return median(q)
}

// floorOf names the baseline of an impl in its group.
func floorOf(group, impl string) string {
	switch {
	case group == "etcd":
		if impl == "mutex" {
			return ""
		}
		return "mutex"
	case strings.HasPrefix(impl, "floor-"):
		return ""
	case group == "redis1" && strings.HasSuffix(impl, "-redigo"):
		return "floor-redigo"
	case group == "redis1":
		return "floor-goredis"
	default:
		return "floor-redigo"
	}
}

func dur(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "–"
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func num(v float64, f string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(f, v)
}

func main() {
	res, order := parse(os.Stdin)
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "report: no BenchmarkLocks lines on stdin")
		os.Exit(1)
	}
	rounds := 0
	for _, s := range res {
		rounds = max(rounds, len(s))
	}
	w := os.Stdout
	fmt.Fprintf(w, "Medians over %d interleaved rounds. *spread* is (max − min) ÷ median of ns/op over the rounds. *× base* is lockswap's (or a library's) ns/op ÷ the base's ns/op, paired round by round (median of the per-round ratios): below 1 is faster. The base is the raw floor of the same client (redis1), the pipelined redigo fan-out floor (redlock), or concurrency.Mutex (etcd). In the contended scenario ns/op is 1 ÷ acquisitions per second, so × base is the inverse of the acq/s ratio.\n\n", rounds)

	var curScenario string
	var curTable string
	for _, name := range order {
		parts := strings.SplitN(name, "/", 3)
		if len(parts) != 3 {
			continue
		}
		scen, group, impl := parts[0], parts[1], parts[2]
		contended := scen == "contended"
		if scen != curScenario {
			if curScenario != "" {
				fmt.Fprintln(w)
			}
			curScenario = scen
			fmt.Fprintf(w, "### %s\n\n", map[string]string{
				"serial":    "serial: 1 goroutine, distinct keys (latency)",
				"parallel":  "parallel: 32 goroutines, distinct keys (throughput)",
				"contended": "contended: 8 goroutines, one key",
			}[scen])
			curTable = ""
		}
		if curTable != scen+"/"+group {
			if curTable != "" {
				fmt.Fprintln(w)
			}
			curTable = scen + "/" + group
			if contended {
				fmt.Fprintf(w, "| %s | ns/op | spread | × base | acq/s | fairness | allocs/op | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", group)
			} else {
				fmt.Fprintf(w, "| %s | ns/op | spread | × base | allocs/op | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|\n", group)
			}
		}
		ns := res.values(name, "ns/op")
		spread := math.NaN()
		if len(ns) > 1 {
			spread = (slices.Max(ns) - slices.Min(ns)) / median(ns) * 100
		}
		ratio := "base"
		if f := floorOf(group, impl); f != "" {
			ratio = num(res.ratio(name, scen+"/"+group+"/"+f, "ns/op"), "%.2f×")
		}
		if contended {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", impl, dur(median(ns)), num(spread, "%.0f%%"), ratio,
				num(res.med(name, "acq/s"), "%.0f"), num(res.med(name, "fairness"), "%.3f"),
				num(res.med(name, "allocs/op"), "%.0f"), dur(res.med(name, "p50-ns")), dur(res.med(name, "p99-ns")))
		} else {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", impl, dur(median(ns)), num(spread, "%.0f%%"), ratio,
				num(res.med(name, "allocs/op"), "%.0f"), dur(res.med(name, "p50-ns")), dur(res.med(name, "p99-ns")))
		}
	}
	fmt.Fprintln(w)
	targets(w, res)
}

// target is one line of the targets table.
type target struct {
	what   string
	value  float64 // measured ratio (or fairness)
	limit  float64
	atMost bool // value must be <= limit (else >=)
}

func targets(w io.Writer, r results) {
	var ts []target
	n := func(scen, group, impl string) string { return scen + "/" + group + "/" + impl }
	// ns/op ratio a ÷ b.
	nsr := func(scen, group, a, b string) float64 { return r.ratio(n(scen, group, a), n(scen, group, b), "ns/op") }
	for _, c := range []string{"goredis", "redigo"} {
		for _, scen := range []string{"serial", "parallel"} {
			ts = append(ts, target{fmt.Sprintf("singleredis %s %s: ns/op ÷ floor", c, scen), nsr(scen, "redis1", "lockswap-"+c, "floor-"+c), 1.05, true})
		}
		ts = append(ts, target{fmt.Sprintf("singleredis %s contended: acq/s ÷ floor polling at the same interval", c),
			r.ratio(n("contended", "redis1", "lockswap-"+c), n("contended", "redis1", "floor-"+c), "acq/s"), 1, false})
		ts = append(ts, target{fmt.Sprintf("singleredis %s contended: fairness", c), r.med(n("contended", "redis1", "lockswap-"+c), "fairness"), 0.75, false})
	}
	for _, scen := range []string{"serial", "parallel", "contended"} {
		ts = append(ts, target{fmt.Sprintf("singleredis goredis %s: ns/op ÷ bsm/redislock", scen), nsr(scen, "redis1", "lockswap-goredis", "redislock-goredis"), 1, true})
	}
	for _, g := range []string{"redlock3", "redlock5"} {
		for _, c := range []string{"goredis", "redigo"} {
			ts = append(ts,
				target{fmt.Sprintf("%s %s serial: latency ÷ redsync", g, c), nsr("serial", g, "lockswap-"+c, "redsync-"+c), 0.75, true},
				target{fmt.Sprintf("%s %s parallel: throughput ÷ redsync", g, c), nsr("parallel", g, "redsync-"+c, "lockswap-"+c), 1.6, false},
				target{fmt.Sprintf("%s %s contended: acq/s ÷ redsync", g, c), r.ratio(n("contended", g, "lockswap-"+c), n("contended", g, "redsync-"+c), "acq/s"), 2.5, false},
			)
		}
		// The same, against redsync as it comes (its default retry delay).
		ts = append(ts, target{fmt.Sprintf("%s redigo contended: acq/s ÷ redsync with its default retry (50–250 ms)", g),
			r.ratio(n("contended", g, "lockswap-redigo"), n("contended", g, "redsync-redigo-defaultretry"), "acq/s"), 2.5, false})
	}
	ts = append(ts,
		target{"etcdlease serial: ns/op ÷ concurrency.Mutex", nsr("serial", "etcd", "lockswap", "mutex"), 1, true},
		target{"etcdlease parallel: ns/op ÷ concurrency.Mutex", nsr("parallel", "etcd", "lockswap", "mutex"), 1, true},
		target{"etcdlease contended: acq/s ÷ concurrency.Mutex", r.ratio(n("contended", "etcd", "lockswap"), n("contended", "etcd", "mutex"), "acq/s"), 5, false},
		target{"etcdlease contended: fairness − Mutex's fairness", r.med(n("contended", "etcd", "lockswap"), "fairness") - r.med(n("contended", "etcd", "mutex"), "fairness"), 0, false},
	)
	fmt.Fprintf(w, "### Targets (ratios paired within each round, median over rounds)\n\n| target | measured | limit | |\n|---|---:|---:|---|\n")
	for _, t := range ts {
		verdict := "–"
		if !math.IsNaN(t.value) {
			ok := t.value >= t.limit
			if t.atMost {
				ok = t.value <= t.limit
			}
			verdict = "met"
			if !ok {
				if t.atMost {
					verdict = fmt.Sprintf("**missed** by %.0f%%", (t.value/t.limit-1)*100)
				} else if t.limit != 0 {
					verdict = fmt.Sprintf("**missed** by %.0f%%", (1-t.value/t.limit)*100)
				} else {
					verdict = "**missed**"
				}
			}
		}
		op := "≥"
		if t.atMost {
			op = "≤"
		}
		fmt.Fprintf(w, "| %s | %s | %s %.2f | %s |\n", t.what, num(t.value, "%.3f"), op, t.limit, verdict)
	}
}
