package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/mdcheck"
)

// The tests in this file run the lockswap binary as a user would: built
// once, run with flags, judged by its stdout, stderr and exit code.

// binary is the lockswap command built once per test binary, with the
// given build tags.
type binary struct {
	tags string
	once sync.Once
	path string
	err  error
}

var (
	// lockswapBin is the command as users build it.
	lockswapBin = &binary{}
	// overclaimBin adds a column that declares more than it keeps (see
	// compare/overclaim.go), to show a contradiction's exit code.
	overclaimBin = &binary{tags: "lockswap_overclaim"}
	binDir       string
)

// build builds b once.
func (b *binary) build(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		name := "lockswap"
		if b.tags != "" {
			name += "-" + b.tags
		}
		b.path = filepath.Join(binDir, name)
		out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.path, ".").CombinedOutput()
		if err != nil {
			b.err = errors.New(string(out))
		}
	})
	if b.err != nil {
		t.Fatalf("go build -tags %q: %v", b.tags, b.err)
	}
	return b.path
}

// lockswapBinary builds the command once per test binary.
func lockswapBinary(t *testing.T) string { return lockswapBin.build(t) }

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "lockswap-cli-test"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// runBinary runs the binary with args and returns its exit code and
// output, failing the test if it runs longer than limit.
func runBinary(t *testing.T, limit time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runProgram(t, lockswapBinary(t), limit, args...)
}

// runProgram runs the program at path with args, as runBinary does.
func runProgram(t *testing.T, path string, limit time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("lockswap %v still running after %v; stderr:\n%s", args, limit, errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestCLIUsageErrors: every usage mistake exits 2 with one line on stderr
// that names it, and prints nothing on stdout.
func TestCLIUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error line
	}{
		{[]string{"frobnicate"}, "frobnicate"},
		{[]string{"compare", "--bogus"}, "-bogus"},
		{[]string{"compare", "extra-arg"}, "extra-arg"},
		{[]string{"compare", "--format", "yaml"}, "yaml"},
		{[]string{"compare", "--iterations", "0"}, "--iterations 0"},
		{[]string{"compare", "--iterations", "-5"}, "--iterations -5"},
		{[]string{"compare", "--budget", "0s"}, "--budget"},
		{[]string{"compare", "--backends", "zookeeper"}, "zookeeper"},
		{[]string{"compare", "--columns", "zookeeper?x=1"}, "zookeeper"},
		{[]string{"compare", "--columns", "singleredis?ttl=1s"}, "ttl"},
		{[]string{"compare", "--columns", "redlock?restart_safety=maybe"}, "restart_safety"},
		{[]string{"compare", "--columns", "redlock", "--backends", "redlock"}, "not both"},
		{[]string{"compare", "--scenarios", "earthquake"}, "earthquake"},
		{[]string{"bench", "--backends", "nope"}, "nope"},
		{[]string{"bench", "--bogus"}, "-bogus"},
		{[]string{"bench", "--duration", "0s"}, "--duration"},
		{[]string{"inspect"}, "--redis"},
		{[]string{"inspect", "--bogus"}, "-bogus"},
		{[]string{"inspect", "--redis", "127.0.0.1", "extra-arg"}, "extra-arg"},
		{[]string{"inspect", "--redis", "u:pw@127.0.0.1"}, "user information"},
		{[]string{"inspect", "--redis", "rediss://127.0.0.1"}, "rediss"},
		{[]string{"inspect", "--redis", "redis://:pw@127.0.0.1", "--password", "pw"}, "give one"},
		{[]string{"compare", "--password", "pw"}, "--password"},
		{[]string{"history", "--password", "pw"}, "--password"},
		{[]string{"history", "--etcd", "u:pw@h:2379"}, "user information"},
		{[]string{"history", "--redis", "h:1,h:2", "--configs", "redlock*"}, "matches no configuration"},
		{[]string{"compare", "--redis", "redis://:a@127.0.0.1:1,redis://:b@127.0.0.1:2,redis://:a@127.0.0.1:3"}, "other credentials"},
		{[]string{"compare", "--redis", "redis://127.0.0.1:1/2"}, "database"},
		{[]string{"version", "--bogus"}, "-bogus"},
	} {
		code, out, errOut := runBinary(t, time.Minute, tc.args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != exitUsage || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "lockswap: ") || !strings.Contains(lines[0], tc.want) {
			t.Errorf("lockswap %v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestCLIHelp: -h prints the flags and the command's own exit codes on
// stdout, exit 0, in lines of at most 100 columns; a command without
// flags shows no empty "flags:" (issue 30, "CLI help that fits each
// command").
func TestCLIHelp(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, not []string // exit codes the command has, and has not
	}{
		{[]string{"-h"}, []string{"  3 ", "  4 ", "130"}, nil},
		{[]string{"compare", "-h"}, []string{"  3 ", "  4 ", "130"}, nil},
		{[]string{"bench", "-h"}, []string{"  2 ", "130"}, []string{"  3 ", "  4 "}},
		{[]string{"inspect", "-h"}, []string{"  2 ", "  3 ", "  4 ", "  5 ", "130"}, nil},
		{[]string{"cleanup", "-h"}, []string{"  2 ", "130"}, []string{"  3 ", "  4 "}},
		{[]string{"soak", "-h"}, []string{"  2 ", "130"}, []string{"  3 ", "  4 "}},
		{[]string{"history", "-h"}, []string{"  2 ", "  3 ", "  4 ", "130"}, nil},
		{[]string{"version", "-h"}, []string{"  2 "}, []string{"  3 ", "  4 ", "130", "flags:"}},
		{[]string{"dev", "-h"}, []string{"  2 "}, []string{"  3 ", "  4 "}},
		{[]string{"dev", "etcd", "-h"}, []string{"  2 "}, []string{"  3 ", "  4 "}},
	} {
		code, out, errOut := runBinary(t, time.Minute, c.args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "exit codes:") {
			t.Errorf("lockswap %v: exit %d, stderr %q, stdout:\n%s", c.args, code, errOut, out)
		}
		codes := out[strings.Index(out, "exit codes:")+1:]
		for _, w := range c.want {
			if !strings.Contains(codes, w) {
				t.Errorf("lockswap %v: the exit codes lack %q:\n%s", c.args, w, codes)
			}
		}
		for _, w := range c.not {
			if strings.Contains(out, w) {
				t.Errorf("lockswap %v: -h shows %q, which this command does not have:\n%s", c.args, w, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("lockswap %v: a line of %d columns (at most 100): %q", c.args, n, line)
			}
		}
	}
	if _, out, _ := runBinary(t, time.Minute, "compare", "-h"); !strings.Contains(out, "-columns") || !strings.Contains(out, "redlock?restart_safety=true") {
		t.Errorf("compare -h does not explain --columns:\n%s", out)
	}
}

// TestCLIInconclusive: a cell that runs out of its time budget is
// inconclusive: exit 4, never a contradiction.
func TestCLIInconclusive(t *testing.T) {
	code, out, errOut := runBinary(t, time.Minute, "compare", "--miniredis", "--columns", "singleredis", "--scenarios", "contention", "--budget", "1ms")
	if code != exitInconclusive || !strings.Contains(errOut, "inconclusive") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 4 and one line saying inconclusive", code, errOut)
	}
	if !strings.Contains(out, "\n1 contention  ?\n") || !strings.Contains(out, "time budget of 1ms used up") {
		t.Errorf("the table does not show the cell inconclusive with its reason:\n%s", out)
	}
}

// TestCLIContradiction: a column whose declaration the measurement
// contradicts exits 3, with one line on stderr saying so and the cell
// marked ✗ in the table; the binary built as users build it has no such
// column (a usage error).
func TestCLIContradiction(t *testing.T) {
	args := []string{"compare", "--miniredis", "--columns", "overclaiming", "--scenarios", "holder-pause", "--iterations", "3"}
	code, out, errOut := runProgram(t, overclaimBin.build(t), 2*time.Minute, args...)
	if code != exitContradiction || !strings.Contains(errOut, "contradict") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 3 and one line saying what contradicts", code, errOut)
	}
	if !strings.Contains(out, "✗") {
		t.Errorf("the table marks no cell ✗:\n%s", out)
	}
	if code, _, errOut := runBinary(t, time.Minute, args...); code != exitUsage || !strings.Contains(errOut, "overclaiming") {
		t.Errorf("lockswap without the test tag: exit %d, stderr %q; want 2 naming the unknown column", code, errOut)
	}
}

// TestCLIError: a failure that is not a usage mistake (here a refused
// connection) exits 1 with one line on stderr naming what failed.
func TestCLIError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	code, out, errOut := runBinary(t, time.Minute, "inspect", "--redis", addr)
	if code != exitError || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, addr) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one line naming %s", code, out, errOut, addr)
	}
}

// TestCLIUnreachable: a --redis server or --etcd endpoint that does not
// answer makes compare and history inconclusive (exit 4) within 5 s, with
// one line naming the server, and nothing measured.
func TestCLIUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a free port: connections are refused
	for _, args := range [][]string{
		{"compare", "--redis", addr, "--backends", "singleredis"},
		{"history", "--redis", addr, "--for", "1s"},
		{"history", "--etcd", addr, "--for", "1s"},
	} {
		start := time.Now()
		code, out, errOut := runBinary(t, time.Minute, args...)
		took := time.Since(start)
		if code != exitInconclusive || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, addr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 4, nothing on stdout and one line naming %s", args, code, out, errOut, addr)
		}
		// The promise to the user (a deadline, not a timing measurement).
		if took > 5*time.Second {
			t.Errorf("%v: took %v to report an unreachable server, want under 5s", args, took)
		}
	}
}

// cliColumns are the columns of the format tests: scenarios whose outcome
// does not depend on timing, on in-process servers.
var cliArgs = []string{"compare", "--miniredis", "--columns", "singleredis?fence=true,legacysetnx?unit=ms", "--scenarios", "holder-pause,clock-ahead,restart-no-persistence"}

// TestCLIFormats: each --format, exit 0, as a user reads it.
func TestCLIFormats(t *testing.T) {
	t.Run("table", func(t *testing.T) {
		code, out, errOut := runBinary(t, 2*time.Minute, cliArgs...)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		for _, want := range []string{"single+f", "legacy+ms", "2 clock-ahead", "✓ held", "! lost", "! fenced", "– skip",
			"singleredis?fence=true", "✓  as declared", "Which to choose", "clients' wall clocks may disagree: single+f"} {
			if !strings.Contains(out, want) {
				t.Errorf("table output lacks %q:\n%s", want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("line of %d columns (want at most 100): %q", n, line)
			}
		}
	})
	t.Run("markdown", func(t *testing.T) {
		code, out, errOut := runBinary(t, 2*time.Minute, append(cliArgs, "--format", "markdown")...)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		// Rendered as CommonMark with GitHub tables: a table, the legends
		// and one numbered note per scenario with an item per column.
		if err := mdcheck.Check([]byte(out), 3, 2); err != nil {
			t.Error(err)
		}
	})
	t.Run("json", func(t *testing.T) {
		code, out, errOut := runBinary(t, 2*time.Minute, append(cliArgs, "--format", "json")...)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		var res struct {
			Columns []struct{ Label, Spec string }
			Rows    []struct {
				Scenario string
				Cells    map[string]struct{ Outcome, Verdict string }
			}
			Contradictions int
			Choose         []struct{ Need string } `json:"which_to_choose"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if len(res.Columns) != 2 || res.Columns[0].Label != "single+f" || res.Columns[0].Spec != "singleredis?fence=true" || len(res.Rows) != 3 || len(res.Choose) == 0 {
			t.Errorf("JSON: %+v", res)
		}
		if c := res.Rows[1].Cells["legacy+ms"]; res.Rows[1].Scenario != "clock-ahead" || c.Outcome != "violated" || c.Verdict != "as declared" {
			t.Errorf("clock-ahead legacy+ms: %+v in %+v", c, res.Rows[1])
		}
	})
}

// TestCLIInterrupt: Ctrl-C prints what was measured so far and exits 130.
func TestCLIInterrupt(t *testing.T) {
	cmd := exec.Command(lockswapBinary(t), "compare", "--miniredis", "--progress", "--columns", "singleredis",
		"--scenarios", "contention,holder-pause", "--iterations", "100000")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the first cell to start, then interrupt.
	lines := bufio.NewScanner(stderr)
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if strings.HasPrefix(lines.Text(), "[1/2] contention") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		seen = append(seen, lines.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running a minute after SIGINT; stderr:\n%s", strings.Join(seen, "\n"))
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit %d after SIGINT, want 130; stderr:\n%s", code, strings.Join(seen, "\n"))
	}
	if s := out.String(); !strings.Contains(s, "1 contention") || !strings.Contains(s, "interrupted while it ran") || !strings.Contains(s, "INTERRUPTED") {
		t.Errorf("stdout does not show the partial result:\n%s", s)
	}
}
