package historyrun

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Write writes the results as a table, then, per configuration whose
// verdict is not Holds or that wrote files, the reason, the seed and the
// files.
func Write(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "configuration\tseed\tsections\toutlived lock\trejected by fence\tfaults\tchecked in\tverdict")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%v\t%s\n", r.Config, r.Seed, r.Sections, r.Late, r.Rejected, len(r.Faults), checkedIn(r.CheckTime), r.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		fmt.Fprintf(w, "\n%s: %s: %s.\n", r.Config, r.Verdict, r.Why)
		if len(r.Faults) > 0 {
			kinds := map[string]int{}
			var order []string
			for _, e := range r.Faults {
				if kinds[e.Fault] == 0 {
					order = append(order, e.Fault)
				}
				kinds[e.Fault]++
			}
			var b strings.Builder
			for i, k := range order {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s ×%d", k, kinds[k])
			}
			fmt.Fprintf(w, "  faults drawn: %s\n", b.String())
		}
		for _, f := range r.Files {
			fmt.Fprintf(w, "  wrote %s\n", f)
		}
		if len(r.Files) > 0 {
			fmt.Fprintf(w, "  replay the schedule: lockswap history%s --configs %s --seed %d\n", r.on, r.Config, r.Seed)
			if r.login != "" {
				fmt.Fprintf(w, "  (%s)\n", r.login)
			}
		}
		if r.KeysLeft != "" {
			fmt.Fprintf(w, "  KEYS LEFT on your servers: %s\n", r.KeysLeft)
		}
	}
	return nil
}

// ExitCode is the command's exit code for rs: 3 when a result contradicts
// its configuration's declaration, else 4 when one is inconclusive, else 0.
func ExitCode(rs []Result) int {
	code := 0
	for _, r := range rs {
		switch r.Verdict {
		case Contradicted:
			return 3
		case Inconclusive:
			code = 4
		}
	}
	return code
}

// checkedIn rounds d for the table to about three digits.
func checkedIn(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
