// Command report reads the output of BenchmarkLocks (go test -bench, any
// -count) on stdin and writes markdown: one table per scenario and group
// with medians over the rounds, the spread of ns/op, ratios to the floor
// (or reference library) paired round by round, and the targets of issues
// 8, 15, 16 and 31 with met / missed (all but 8's with the range over
// rounds). With -previous, the go test output of an earlier run, it ends
// with each benchmark against that run (compare.go).
package main

import (
	"bufio"
	"flag"
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

var lineRE = regexp.MustCompile(`^Benchmark(Locks|Turns)/(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// turnsPrefix begins the names parse gives BenchmarkTurns's results
// ("turns/redis1/<context>/<ours>/<base>"), which are not in the order it
// returns: the scenario tables and the comparison with an earlier run
// are BenchmarkLocks's; targets31 reads them.
const turnsPrefix = "turns/"

// totalCPU is the unit parse adds to a sample that has both the client's
// CPU time per op (cpu-ns/op) and the servers' (srv-cpu-ns/op): their sum.
const totalCPU = "total-cpu-ns/op"

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
		name := m[2]
		if m[1] == "Turns" {
			name = turnsPrefix + name
		}
		f := strings.Fields(m[4])
		s := sample{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				s[f[i+1]] = v
			}
		}
		cpu, ok1 := s["cpu-ns/op"]
		srv, ok2 := s["srv-cpu-ns/op"]
		if ok1 && ok2 {
			s[totalCPU] = cpu + srv
		}
		if _, ok := res[name]; !ok && m[1] == "Locks" {
			order = append(order, name)
		}
		res[name] = append(res[name], s)
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

// ratioRange is the lowest and highest per-round ratio of a's unit ÷ b's.
func (r results) ratioRange(a, b, unit string) (lo, hi float64) {
	va, vb := r.values(a, unit), r.values(b, unit)
	lo, hi = math.NaN(), math.NaN()
	for i := range min(len(va), len(vb)) {
		if vb[i] == 0 {
			continue
		}
		q := va[i] / vb[i]
		if math.IsNaN(lo) || q < lo {
			lo = q
		}
		if math.IsNaN(hi) || q > hi {
			hi = q
		}
	}
	return lo, hi
}

// valueRange is the lowest and highest of name's unit over the rounds.
func (r results) valueRange(name, unit string) (lo, hi float64) {
	v := r.values(name, unit)
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(v), slices.Max(v)
}

// floorOf names the baseline of an impl in its group.
func floorOf(scen, group, impl string) string {
	switch {
	case scen == "separate" || scen == "processes":
		if impl == "floor-poll1ms" {
			return ""
		}
		return "floor-poll1ms"
	case group == "etcd":
		if impl == "mutex" {
			return ""
		}
		return "mutex"
	case strings.HasPrefix(impl, "floor-"):
		return ""
	case group == "redis1" && strings.HasSuffix(impl, "-default"):
		// A library on a client built as it comes: that client's floor.
		return "floor-" + strings.TrimPrefix(impl, "lockswap-")
	case group == "redis1" && strings.HasSuffix(impl, "-redigo"):
		return "floor-redigo"
	case group == "redis1" && strings.Contains(impl, "rueidis"):
		return "floor-rueidis"
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

var (
	previous      = flag.String("previous", "", "go test output of the previous run (the format of stdin), to compare with")
	previousLabel = flag.String("previous-label", "", "what the previous run is, for the text (default: the file's name)")
)

func main() {
	flag.Parse()
	res, order := parse(os.Stdin)
	if len(order) == 0 {
		if turnsOnly(os.Stdout, res) {
			return
		}
		fmt.Fprintln(os.Stderr, "report: no BenchmarkLocks or BenchmarkTurns lines on stdin")
		os.Exit(1)
	}
	rounds := 0
	for _, name := range order { // BenchmarkLocks's; the turns are not counted here
		rounds = max(rounds, len(res[name]))
	}
	w := os.Stdout
	fmt.Fprintf(w, "Medians over %d rounds (in the tables of in-process benchmarks Go runs each benchmark its `-count` rounds in a row, so the rounds of two libraries are seconds apart, not interleaved; the processes table runs every library in each round). *spread* is (max − min) ÷ median of ns/op over the rounds. *× base* is lockswap's (or a library's) ns/op ÷ the base's ns/op, paired round by round (median of the per-round ratios): below 1 is faster. The base is the raw floor of the same client (redis1), the pipelined redigo fan-out floor (redlock), or concurrency.Mutex (etcd). In the contended scenario ns/op is 1 ÷ acquisitions per second, so × base is the inverse of the acq/s ratio.\n\n", rounds)

	var curScenario string
	var curTable string
	for _, name := range order {
		parts := strings.SplitN(name, "/", 3)
		if len(parts) != 3 {
			continue
		}
		scen, group, impl := parts[0], parts[1], parts[2]
		contended := scen == "contended" || scen == "separate" || scen == "processes"
		if scen != curScenario {
			if curScenario != "" {
				fmt.Fprintln(w)
			}
			curScenario = scen
			fmt.Fprintf(w, "### %s\n\n", map[string]string{
				"serial":    "serial: 1 goroutine, distinct keys (latency)",
				"parallel":  "parallel: 32 goroutines, distinct keys (throughput)",
				"contended": "contended: 8 goroutines, one key, one shared Locker (and client) per library",
				"separate":  "separate: 8 goroutines, one key, each with its own Locker and client (what 8 processes see)",
				"processes": "processes: 8 OS processes, one key, each with its own Locker and client",
			}[scen])
			curTable = ""
		}
		if curTable != scen+"/"+group {
			if curTable != "" {
				fmt.Fprintln(w)
			}
			curTable = scen + "/" + group
			if contended {
				fmt.Fprintf(w, "| %s | ns/op | spread | × base | acq/s | fairness | cmds/op | cmds/goroutine-s | allocs/op | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", group)
			} else {
				fmt.Fprintf(w, "| %s | ns/op | spread | × base | cmds/op | CPU/op | server CPU/op | allocs/op | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", group)
			}
		}
		ns := res.values(name, "ns/op")
		spread := math.NaN()
		if len(ns) > 1 {
			spread = (slices.Max(ns) - slices.Min(ns)) / median(ns) * 100
		}
		ratio := "base"
		if f := floorOf(scen, group, impl); f != "" {
			ratio = num(res.ratio(name, scen+"/"+group+"/"+f, "ns/op"), "%.2f×")
		}
		if contended {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", impl, dur(median(ns)), num(spread, "%.0f%%"), ratio,
				num(res.med(name, "acq/s"), "%.0f"), num(res.med(name, "fairness"), "%.3f"),
				num(res.med(name, "cmds/op"), "%.2f"), num(res.med(name, "cmds/goroutine-s"), "%.0f"),
				num(res.med(name, "allocs/op"), "%.0f"), dur(res.med(name, "p50-ns")), dur(res.med(name, "p99-ns")))
		} else {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", impl, dur(median(ns)), num(spread, "%.0f%%"), ratio,
				num(res.med(name, "cmds/op"), "%.2f"), dur(res.med(name, "cpu-ns/op")), dur(res.med(name, "srv-cpu-ns/op")),
				num(res.med(name, "allocs/op"), "%.0f"), dur(res.med(name, "p50-ns")), dur(res.med(name, "p99-ns")))
		}
	}
	fmt.Fprintln(w)
	targets(w, res)
	fmt.Fprintln(w)
	targets15(w, res)
	targets16(w, res)
	targets31(w, res)
	if *previous != "" {
		f, err := os.Open(*previous)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		prev, _ := parse(f)
		f.Close()
		label := *previousLabel
		if label == "" {
			label = *previous
		}
		fmt.Fprintln(w)
		writeComparison(w, label, prev, res, order)
	}
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

// target15 is one line of issue 15's targets: the median and the range
// over rounds.
type target15 struct {
	what          string
	value, lo, hi float64
	limit         float64
	atMost        bool // limit is NaN for a reference row: no verdict
}

func targets15(w io.Writer, r results) {
	n := func(scen, group, impl string) string { return scen + "/" + group + "/" + impl }
	var ts []target15
	// ratio of a's unit to b's, both in scen/group.
	add := func(what, scen, group, a, b, unit string, limit float64, atMost bool) {
		lo, hi := r.ratioRange(n(scen, group, a), n(scen, group, b), unit)
		ts = append(ts, target15{what, r.ratio(n(scen, group, a), n(scen, group, b), unit), lo, hi, limit, atMost})
	}
	add("singleredis rueidis parallel: ns/op ÷ go-redis floor (cost)", "parallel", "redis1", "lockswap-rueidis", "floor-goredis", "ns/op", 0.55, true)
	add("singleredis rueidis parallel: throughput ÷ rueidislock", "parallel", "redis1", "rueidislock", "lockswap-rueidis", "ns/op", 1.2, false)
	add("(raw rueidis floor parallel: ns/op ÷ go-redis floor)", "parallel", "redis1", "floor-rueidis", "floor-goredis", "ns/op", 0.55, true)
	add("singleredis rueidis serial: ns/op ÷ rueidis floor", "serial", "redis1", "lockswap-rueidis", "floor-rueidis", "ns/op", 1.05, true)
	for _, g := range []string{"redlock3", "redlock5"} {
		for _, rs := range []string{"redsync-redigo", "redsync-goredis"} {
			add(g+" rueidis parallel: throughput ÷ "+rs, "parallel", g, rs, "lockswap-rueidis", "ns/op", 2, false)
		}
		add("("+g+" rueidis parallel: throughput grouped ÷ ungrouped)", "parallel", g, "lockswap-rueidis-ungrouped", "lockswap-rueidis", "ns/op", 1, false)
		add(g+" rueidis serial: latency ÷ redsync-redigo", "serial", g, "lockswap-rueidis", "redsync-redigo", "ns/op", 0.8, true)
		add(g+" redigo serial: latency ÷ redsync-redigo", "serial", g, "lockswap-redigo", "redsync-redigo", "ns/op", 0.8, true)
	}
	for _, scen := range []string{"separate", "processes"} {
		for _, c := range []string{"goredis-fair", "rueidis-fair"} {
			im := "lockswap-" + c // Options.FairWait: the wait (iii) is about
			lo, hi := r.valueRange(n(scen, "redis1", im), "fairness")
			ts = append(ts, target15{fmt.Sprintf("%s singleredis %s: fairness", scen, c), r.med(n(scen, "redis1", im), "fairness"), lo, hi, 0.95, false})
			add(fmt.Sprintf("%s singleredis %s: acq/s ÷ floor polling every 1 ms", scen, c), scen, "redis1", im, "floor-poll1ms", "acq/s", 1.3, false)
			add(fmt.Sprintf("%s singleredis %s: acq/s ÷ rueidislock", scen, c), scen, "redis1", im, "rueidislock", "acq/s", 2, false)
		}
	}
	for _, scen := range []string{"serial", "parallel"} {
		for _, c := range []string{"goredis", "rueidis"} {
			ts = append(ts, r.allocsOver(fmt.Sprintf("singleredis %s %s: allocs/op − floor's", c, scen),
				n(scen, "redis1", "lockswap-"+c), n(scen, "redis1", "floor-"+c), 6))
		}
	}
	writeRangeTargets(w, "Targets of issue 15", ts)
}

// allocsOver is the target that a's allocs/op exceed b's by at most
// limit, paired round by round: median and range of the differences.
func (r results) allocsOver(what, a, b string, limit float64) target15 {
	va, vb := r.values(a, "allocs/op"), r.values(b, "allocs/op")
	var d []float64
	for i := range min(len(va), len(vb)) {
		d = append(d, va[i]-vb[i])
	}
	lo, hi := math.NaN(), math.NaN()
	if len(d) > 0 {
		lo, hi = slices.Min(d), slices.Max(d)
	}
	return target15{what, median(d), lo, hi, limit, true}
}

// targets31 is issue 31's: singleredis against its own client's floor,
// with the client built as the library builds it by default (go-redis
// without ContextTimeoutEnabled, rueidis without AlwaysPipelining: a
// setting the adapter needs counts as its cost) and as the docs
// recommend; redlock against redsync; allocations against the floor.
func targets31(w io.Writer, r results) {
	n := func(scen, group, impl string) string { return scen + "/" + group + "/" + impl }
	var ts []target15
	unit := "ns/op"
	add := func(what, scen, group, a, b string, limit float64, atMost bool) {
		if len(r.values(n(scen, group, a), unit)) == 0 || len(r.values(n(scen, group, b), unit)) == 0 {
			return // a run without this pair (a subset, or before CPU times were reported)
		}
		lo, hi := r.ratioRange(n(scen, group, a), n(scen, group, b), unit)
		ts = append(ts, target15{what, r.ratio(n(scen, group, a), n(scen, group, b), unit), lo, hi, limit, atMost})
	}
	scens := []string{"serial", "parallel"}
	limit := map[string]float64{"serial": 1.05, "parallel": 1.10}
	asItComes := map[string]string{"goredis": "floor-goredis-default", "redigo": "floor-redigo", "rueidis": "floor-rueidis-default"}
	for _, c := range []string{"goredis", "redigo", "rueidis"} {
		for _, scen := range scens {
			add(fmt.Sprintf("singleredis %s %s: ns/op ÷ %s (client as it comes)", c, scen, asItComes[c]), scen, "redis1", "lockswap-"+c, asItComes[c], limit[scen], true)
		}
		if c == "redigo" {
			continue // one way to build it
		}
		for _, scen := range scens {
			add(fmt.Sprintf("singleredis %s %s: ns/op ÷ floor-%s (client with the recommended setting)", c, scen, c), scen, "redis1", "lockswap-"+c, "floor-"+c, limit[scen], true)
		}
		if c == "goredis" {
			for _, scen := range scens {
				add(fmt.Sprintf("singleredis on go-redis as it comes %s: lockswap-goredis-default ÷ floor-goredis-default", scen), scen, "redis1", "lockswap-goredis-default", "floor-goredis-default", limit[scen], true)
			}
		}
	}
	for _, g := range []string{"redlock3", "redlock5"} {
		for _, c := range []string{"goredis", "redigo"} {
			add(fmt.Sprintf("%s %s serial: latency ÷ redsync-%s", g, c, c), "serial", g, "lockswap-"+c, "redsync-"+c, 0.8, true)
		}
		rs := "redsync-rueidis" // on the same client, when the run has it
		if len(r[n("serial", g, rs)]) == 0 {
			rs = "redsync-redigo"
		}
		add(fmt.Sprintf("%s rueidis serial: latency ÷ %s", g, rs), "serial", g, "lockswap-rueidis", rs, 0.8, true)
		// For reference, with no limit or verdict of their own: the
		// protocol's least work (floor-redigo, one goroutine pipelining
		// to the N instances, a fixed token, no deadline) against the
		// same redsync, the room the protocol leaves under the limit.
		ref := func(what, b string) { add(what, "serial", g, "floor-redigo", b, math.NaN(), true) }
		for _, c := range []string{"goredis", "redigo"} {
			ref(fmt.Sprintf("(%s Redlock floor serial: floor-redigo ÷ redsync-%s)", g, c), "redsync-"+c)
		}
		if rs == "redsync-rueidis" {
			ref(fmt.Sprintf("(%s Redlock floor serial: floor-redigo ÷ %s)", g, rs), rs)
		}
	}
	add("redlock3 rueidis parallel: throughput ÷ redsync-redigo", "parallel", "redlock3", "redsync-redigo", "lockswap-rueidis", 2, false)
	add("redlock5 rueidis parallel: throughput ÷ redsync-redigo", "parallel", "redlock5", "redsync-redigo", "lockswap-rueidis", 2.5, false)
	ts = append(ts, turnsTargets(r)...)
	// The same targets in CPU time (this process's and the servers', per
	// op), which the scheduling of a busy machine does not blur as it
	// blurs latency: where ns/op cannot tell 5%, these can.
	unit = totalCPU
	for _, c := range []string{"goredis", "redigo", "rueidis"} {
		for _, scen := range scens {
			add(fmt.Sprintf("singleredis %s %s: CPU/op ÷ %s's (client as it comes)", c, scen, asItComes[c]), scen, "redis1", "lockswap-"+c, asItComes[c], limit[scen], true)
			if c != "redigo" {
				add(fmt.Sprintf("singleredis %s %s: CPU/op ÷ floor-%s's (client with the recommended setting)", c, scen, c), scen, "redis1", "lockswap-"+c, "floor-"+c, limit[scen], true)
			}
		}
	}
	for _, scen := range scens {
		add(fmt.Sprintf("singleredis on go-redis as it comes %s: CPU/op, lockswap-goredis-default ÷ floor-goredis-default", scen), scen, "redis1", "lockswap-goredis-default", "floor-goredis-default", limit[scen], true)
	}
	for _, scen := range scens {
		for _, c := range []string{"goredis", "redigo", "rueidis"} {
			ts = append(ts, r.allocsOver(fmt.Sprintf("singleredis %s %s: allocs/op − floor-%s's", c, scen, c),
				n(scen, "redis1", "lockswap-"+c), n(scen, "redis1", "floor-"+c), 8))
		}
		ts = append(ts, r.allocsOver(fmt.Sprintf("singleredis on go-redis as it comes %s: allocs/op − floor-goredis-default's", scen),
			n(scen, "redis1", "lockswap-goredis-default"), n(scen, "redis1", "floor-goredis-default"), 8))
	}
	writeRangeTargets(w, "Targets of issue 31", ts)
}

// turnsOnly writes the report of a run of BenchmarkTurns alone
// (BENCH='^$' bench/run.sh): its table of issue 31's pairs in turns. It
// reports false, writing nothing, when r has no turns either.
func turnsOnly(w io.Writer, r results) bool {
	ts := turnsTargets(r)
	if len(ts) == 0 {
		return false
	}
	writeRangeTargets(w, "Issue 31's 32-goroutine pairs in turns, BenchmarkTurns alone", ts)
	return true
}

// turnsTargets are issue 31's 32-goroutine targets in turns
// (BenchmarkTurns): the median over the rounds of each round's median
// ratio, and their range; the pairs the run lacks have no row.
func turnsTargets(r results) []target15 {
	var ts []target15
	for _, ctx := range []string{"cancellable", "background"} {
		for _, p := range []struct{ what, ours, base string }{
			{"singleredis goredis", "lockswap-goredis", "floor-goredis"},
			{"singleredis goredis", "lockswap-goredis", "floor-goredis-default"},
			{"singleredis on go-redis as it comes", "lockswap-goredis-default", "floor-goredis-default"},
			{"singleredis redigo", "lockswap-redigo", "floor-redigo"},
			{"singleredis rueidis", "lockswap-rueidis", "floor-rueidis"},
			{"singleredis rueidis", "lockswap-rueidis", "floor-rueidis-default"},
			{"", "floor-rueidis", "floor-rueidis"}, // A/A
			// For reference, with no verdict: the bounded floors (a
			// token per acquisition and context.WithTimeout per
			// command on the raw client) against the floor, and
			// lockswap against them.
			{"", "bounded-goredis", "floor-goredis"},
			{"", "lockswap-goredis", "bounded-goredis"},
			{"", "bounded-redigo", "floor-redigo"},
			{"", "lockswap-redigo", "bounded-redigo"},
			{"", "bounded-rueidis", "floor-rueidis"},
			{"", "lockswap-rueidis", "bounded-rueidis"},
		} {
			v := r.values(turnsPrefix+"redis1/"+ctx+"/"+p.ours+"/"+p.base, "ratio")
			if len(v) == 0 {
				continue
			}
			what, limit := fmt.Sprintf("%s parallel, in turns, %s caller: %s ÷ %s", p.what, ctx, p.ours, p.base), 1.10
			switch {
			case p.ours == p.base:
				what, limit = fmt.Sprintf("(A/A parallel, in turns, %s caller: %s ÷ itself)", ctx, p.base), math.NaN()
			case p.what == "":
				what, limit = fmt.Sprintf("(parallel, in turns, %s caller: %s ÷ %s)", ctx, p.ours, p.base), math.NaN()
			}
			ts = append(ts, target15{what, median(v), slices.Min(v), slices.Max(v), limit, true})
		}
	}
	return ts
}

// targets16 is issue 16's cost of fencing: redlock with Options.Fence
// against the same client's unfenced redlock.
func targets16(w io.Writer, r results) {
	n := func(scen, group, impl string) string { return scen + "/" + group + "/" + impl }
	var ts []target15
	for _, g := range []string{"redlock3", "redlock5"} {
		for _, c := range []string{"goredis", "redigo"} {
			f, u := "lockswap-fenced-"+c, "lockswap-"+c
			lo, hi := r.ratioRange(n("serial", g, f), n("serial", g, u), "ns/op")
			ts = append(ts, target15{fmt.Sprintf("%s %s serial: fenced ÷ unfenced latency", g, c), r.ratio(n("serial", g, f), n("serial", g, u), "ns/op"), lo, hi, 1.6, true})
			lo, hi = r.ratioRange(n("contended", g, f), n("contended", g, u), "acq/s")
			ts = append(ts, target15{fmt.Sprintf("%s %s contended: fenced ÷ unfenced acq/s", g, c), r.ratio(n("contended", g, f), n("contended", g, u), "acq/s"), lo, hi, 0.7, false})
		}
	}
	writeRangeTargets(w, "Targets of issue 16", ts)
}

// writeRangeTargets writes a table of targets with their range over rounds.
func writeRangeTargets(w io.Writer, title string, ts []target15) {
	fmt.Fprintf(w, "\n### %s (ratios paired within each round: median, and range over the rounds)\n\n| target | median | range over rounds | limit | |\n|---|---:|---:|---:|---|\n", title)
	for _, t := range ts {
		verdict := "–"
		if !math.IsNaN(t.value) {
			ok := t.value >= t.limit
			if t.atMost {
				ok = t.value <= t.limit
			}
			verdict = "met"
			if !ok {
				verdict = "**missed**"
			}
		}
		op := "≥"
		if t.atMost {
			op = "≤"
		}
		rng := "–"
		if !math.IsNaN(t.lo) {
			rng = fmt.Sprintf("%.2f … %.2f", t.lo, t.hi)
		}
		if math.IsNaN(t.limit) {
			fmt.Fprintf(w, "| %s | %s | %s | – | reference |\n", t.what, num(t.value, "%.3f"), rng)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s %.2f | %s |\n", t.what, num(t.value, "%.3f"), rng, op, t.limit, verdict)
	}
}
