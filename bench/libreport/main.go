// Command libreport reads the results TestLibrariesUnderNemesis wrote
// (-libraries.out, JSON) and writes them as markdown: the command that
// produced them, the machine and its load, each library's version and
// configuration, and one table per schedule. With -doc it replaces the
// generated section of that file (between <!-- BEGIN GENERATED --> and
// <!-- END GENERATED -->) in place; without, it writes to stdout.
//
//	cd bench && go run ./libreport -in /tmp/lib.json -doc ../docs/libraries.md
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// result and report are the results file's rows and whole (see
// bench/libhistory_test.go, libResult and libReport).
type result struct {
	Test            string   `json:"test"`
	Library         string   `json:"library"`
	Version         string   `json:"version"`
	Config          string   `json:"config"`
	Schedule        string   `json:"schedule"`
	Seed            uint64   `json:"seed"`
	Sections        int      `json:"sections"`
	Late            int      `json:"late"`
	Rejected        int      `json:"rejected"`
	Faults          string   `json:"faults,omitempty"`
	Pauses          int      `json:"pauses"`
	Verdict         string   `json:"verdict"`
	Violations      []string `json:"violations,omitempty"`
	Undecided       []string `json:"undecided,omitempty"`
	FenceViolations int      `json:"fence_violations"`
	History         string   `json:"history,omitempty"`
}

type report struct {
	Command   string   `json:"command"`
	Date      string   `json:"date"`
	Took      string   `json:"took"`
	For       string   `json:"nemesis_for"`
	Seed      uint64   `json:"seed"`
	LoadStart string   `json:"load_start"`
	LoadEnd   string   `json:"load_end"`
	Machine   string   `json:"machine"`
	Failed    bool     `json:"failed"`
	Rows      []result `json:"rows"`
}

const (
	begin = "<!-- BEGIN GENERATED -->"
	end   = "<!-- END GENERATED -->"
)

// schedules are the schedules in the order they are reported, with what
// each did.
var schedules = []struct{ name, title, about string }{
	{"server-faults", "Server faults",
		"One fault at a time on one server, each held up to 0.5 s (etcd: 1 s) with up to 0.3 s between: paused (SIGSTOP), restarted without its data (Redis only), replies delayed by 20 ms, cut off (blackholed). No holder pauses."},
	{"holder-pauses", "Holder pauses",
		"No server fault. One section in five pauses its holder between its read and its write until its lock has ended (Done, or one TTL after the pause began for a lock renewed in the background) and up to half a TTL more, with the client's connections cut meanwhile, as a paused process sends nothing."},
}

func main() {
	in := flag.String("in", "", "the results file (JSON) TestLibrariesUnderNemesis wrote; default stdin")
	doc := flag.String("doc", "", "replace the generated section of this markdown file; default: write to stdout")
	allowFailed := flag.Bool("allow-failed", false, "report a run whose test failed (a setup error, a run too short), saying so")
	flag.Parse()
	if err := run(*in, *doc, *allowFailed, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "libreport:", err)
		os.Exit(1)
	}
}

func run(in, doc string, allowFailed bool, stdin io.Reader, stdout io.Writer) error {
	var b []byte
	var err error
	if in == "" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(in)
	}
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(rep.Rows) == 0 {
		return errors.New("no results in the file")
	}
	if rep.Failed && !allowFailed {
		return errors.New("the test failed in that run (see its log); -allow-failed reports it all the same")
	}
	md := render(rep)
	if doc == "" {
		_, err := io.WriteString(stdout, md)
		return err
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	i, j := strings.Index(string(old), begin), strings.Index(string(old), end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s section", doc, begin, end)
	}
	out := string(old[:i+len(begin)]) + "\n" + md + string(old[j:])
	return os.WriteFile(doc, []byte(out), 0o644)
}

// cell makes s safe in a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func render(rep report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s` (each run %s; took %s in all, run on %s). ", rep.Command, rep.For, rep.Took, rep.Date)
	fmt.Fprintf(&b, "Every run used seed %d; one run replays with `-run '<its test>'` added to the same flags.\n\n", rep.Seed)
	fmt.Fprintf(&b, "Machine: %s. Load: %s at the start, %s at the end (1, 5, 15 min load averages; the CPUs are shared with other work).\n\n", rep.Machine, rep.LoadStart, rep.LoadEnd)
	if rep.Failed {
		b.WriteString("**The test failed in this run** (a setup error or a run too short: see its log); a row it could not measure is missing or says so.\n\n")
	}
	b.WriteString("Under both schedules every section works (sleeps) for a random time up to a twentieth of the TTL between its read and its write; three clients, each with its own Locker and connections, take two keys; TTL 1 s on Redis, 2 s on etcd; fresh servers for every run.\n\n")
	b.WriteString("Verdicts: `linearizable` (Porcupine found an order of increments that explains the history: evidence, not proof), `lost updates on N of K keys` (no order explains it: two holders read the same value), `undecided` (the checker ran out of its minute per key: not a pass). Late: sections whose write returned after the lock's `Done` closed. Rejected: sections the fenced register refused (a stale fence).\n\n")

	b.WriteString("### Libraries and configurations\n\n| library | version | configuration |\n|---|---|---|\n")
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		if seen[r.Library] {
			continue
		}
		seen[r.Library] = true
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(r.Library), cell(r.Version), cell(r.Config))
	}
	for _, s := range schedules {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n", s.title, s.about)
		if s.name == "server-faults" {
			b.WriteString("| library | sections | late | rejected | faults | verdict | test |\n|---|---:|---:|---:|---|---|---|\n")
		} else {
			b.WriteString("| library | sections | late | rejected | pauses | verdict | test |\n|---|---:|---:|---:|---:|---|---|\n")
		}
		for _, r := range rep.Rows {
			if r.Schedule != s.name {
				continue
			}
			what := r.Faults
			if s.name != "server-faults" {
				what = fmt.Sprint(r.Pauses)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | `%s` |\n", cell(r.Library), r.Sections, r.Late, r.Rejected, cell(what), cell(r.Verdict), r.Test)
		}
	}
	return b.String()
}
