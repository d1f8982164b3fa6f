package soak

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Write writes rep as text: the setting and the target, one row per
// configuration and load, one row per configuration with the ratio and
// the verdict, then the error messages and the keys left of every run
// that had any.
func Write(w io.Writer, rep *Report) error {
	o := rep.Options
	fmt.Fprintf(w, "soak: %d goroutines, each on its own keys (no contention); Acquire and Release each with a %v deadline;\n", o.Goroutines, o.Deadline)
	fmt.Fprintf(w, "      %v per configuration and load; loads: %s (hogs: %d child processes spinning); keys scanned %v after the last cycle\n",
		o.Duration, loadsText(o.Loads), o.Hogs, o.Settle)
	fmt.Fprintf(w, "environment: %s\n", rep.Env)
	fmt.Fprintf(w, "target: 0 errors, 0 lock keys left, and under the hogs at least %.0f%% of the same configuration's cycles/s without them\n", TargetRatio*100)
	fmt.Fprintf(w, "floor: the Redis client alone (SET NX with the TTL, release script) with the same cycle; FLOOR RATIO is its ratio in this run, what the machine left any client\n")
	fmt.Fprintf(w, "CPU/CYCLE: CPU time of this process and the redis-servers it started, per cycle (\"-\" on given servers)\n\n")

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONFIGURATION\tLOAD\tCYCLES\tCYCLES/S\tCPU/CYCLE\tERRORS\tRELEASE ERRORS\tLOCK KEYS LEFT\tFENCE COUNTERS\tQUEUE KEYS\tEPOCHS\tLOAD AVG\tHOG CPU\tNOTE")
	for _, r := range rep.Results {
		hogCPU := "-"
		if r.Load == Hogs {
			hogCPU = r.HogCPU.Round(100 * time.Millisecond).String()
		}
		left := fmt.Sprint(r.Left.LockKeys)
		if r.Left.NoExpiry > 0 {
			left += fmt.Sprintf(" (%d no expiry)", r.Left.NoExpiry)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.Config.Name(), r.Load, r.Cycles, r.PerSec(), cpuText(r),
			r.Errors, r.ReleaseErrors, left, r.Left.FenceCounters, r.Left.QueueKeys, r.Left.Epochs, orDash(r.LoadAvg), hogCPU, oneLine(r.Err))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if hasBothLoads(o.Loads) {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONFIGURATION\tIDLE CYCLES/S\tHOGS CYCLES/S\tRATIO\tFLOOR RATIO\tCPU/CYCLE IDLE → HOGS\tTARGET")
		for _, c := range configsOf(rep) {
			idle, hogs := rep.find(c, Idle), rep.find(c, Hogs)
			if idle == nil || hogs == nil {
				continue
			}
			ratio, ok := rep.Ratio(c)
			rt := "-"
			if ok {
				rt = fmt.Sprintf("%.2f", ratio)
			}
			floor := "-"
			if f, ok := rep.FloorRatio(c); ok {
				floor = fmt.Sprintf("%.2f", f)
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%s → %s\t%s\n", c.Name(), idle.PerSec(), hogs.PerSec(), rt, floor, cpuText(*idle), cpuText(*hogs), verdict(rep, c))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	for _, r := range rep.Results {
		if len(r.Messages) == 0 && len(r.Left.Sample) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: %d errors (%d on release), %d lock keys left\n", r.Config.Name(), r.Load, r.Errors, r.ReleaseErrors, r.Left.LockKeys)
		for _, m := range r.Messages {
			fmt.Fprintf(w, "  %d× %s\n", m.Count, m.Text)
		}
		if shown := sum(r.Messages); shown < r.Errors {
			fmt.Fprintf(w, "  (%d more errors with other messages)\n", r.Errors-shown)
		}
		for _, k := range r.Left.Sample {
			fmt.Fprintf(w, "  left: %s\n", k)
		}
	}
	missed, judged, floors := rep.Missed(), 0, 0
	for _, c := range configsOf(rep) {
		if c.Backend == FloorBackend {
			floors++
		} else {
			judged++
		}
	}
	fmt.Fprintf(w, "\n%d of %d configurations met the target", judged-len(missed), judged)
	switch {
	case floors == 1:
		fmt.Fprint(w, " (1 floor, not judged)")
	case floors > 1:
		fmt.Fprintf(w, " (%d floors, not judged)", floors)
	}
	if len(missed) > 0 {
		names := make([]string, len(missed))
		for i, c := range missed {
			names[i] = c.Name()
		}
		fmt.Fprintf(w, "; missed: %s", strings.Join(names, ", "))
	}
	if rep.Interrupted {
		fmt.Fprint(w, " (interrupted: not every configuration ran)")
	}
	_, err := fmt.Fprintln(w)
	return err
}

// verdict is the TARGET column: met, or what missed it.
func verdict(rep *Report, c Config) string {
	var why []string
	errs, left, failed := 0, 0, false
	for _, r := range rep.Results {
		if r.Config.Name() == c.Name() {
			errs += r.Errors
			left += r.Left.LockKeys
			failed = failed || r.Err != ""
		}
	}
	if errs > 0 {
		why = append(why, fmt.Sprintf("%d errors", errs))
	}
	if left > 0 {
		why = append(why, fmt.Sprintf("%d keys left", left))
	}
	if failed {
		why = append(why, "run failed")
	}
	if ratio, ok := rep.Ratio(c); ok && ratio < TargetRatio {
		why = append(why, fmt.Sprintf("ratio < %.1f", TargetRatio))
	}
	switch {
	case c.Backend == FloorBackend && len(why) == 0:
		return "floor, not judged (would meet)"
	case c.Backend == FloorBackend:
		return "floor, not judged (would miss: " + strings.Join(why, ", ") + ")"
	case len(why) == 0:
		return "met"
	}
	return "MISSED: " + strings.Join(why, ", ")
}

// configsOf returns the configurations of rep's results, in order.
func configsOf(rep *Report) []Config {
	var out []Config
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if !seen[r.Config.Name()] {
			seen[r.Config.Name()] = true
			out = append(out, r.Config)
		}
	}
	return out
}

func hasBothLoads(loads []Load) bool {
	idle, hogs := false, false
	for _, l := range loads {
		idle, hogs = idle || l == Idle, hogs || l == Hogs
	}
	return idle && hogs
}

func loadsText(loads []Load) string {
	s := make([]string, len(loads))
	for i, l := range loads {
		s[i] = string(l)
	}
	return strings.Join(s, " then ")
}

func sum(ms []Message) int {
	n := 0
	for _, m := range ms {
		n += m.Count
	}
	return n
}

// cpuText is r's CPU per cycle in µs, or "-" when unknown.
func cpuText(r Result) string {
	if r.CPUPerCycle() <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", float64(r.CPUPerCycle())/float64(time.Microsecond))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }
