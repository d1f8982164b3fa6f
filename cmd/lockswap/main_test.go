package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/compare"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCompareCommand(t *testing.T) {
	code, out, errOut := runCLI("compare", "--columns", "singleredis?fence=true,legacysetnx?unit=ms", "--scenarios", "holder-pause,clock-ahead",
		"--miniredis", "--format", "markdown")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"| scenario | single+f | legacy+ms |", "| 2 clock-ahead | ✓ held | ! lost |", "`legacysetnx?unit=ms`", "miniredis"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown output lacks %q:\n%s", want, out)
		}
	}
	if errOut != "" {
		t.Errorf("progress printed on a non-terminal stderr: %q", errOut)
	}
}

// TestBadUsage: usage mistakes exit 2 with a message (the CLI tests in
// cli_test.go cover the flags of each command).
func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"inspect"},
	} {
		if code, _, errOut := runCLI(args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}

// TestCompareExitCodes: the exit code follows the verdicts, a
// contradiction first.
func TestCompareExitCodes(t *testing.T) {
	cells := func(vs ...compare.Verdict) *compare.Result {
		row := compare.Row{Scenario: "s", Cells: map[string]compare.Cell{}}
		for i, v := range vs {
			row.Cells[strconv.Itoa(i)] = compare.Cell{Verdict: v}
		}
		return &compare.Result{Rows: []compare.Row{row}}
	}
	for _, tc := range []struct {
		res  *compare.Result
		want int
	}{
		{cells(compare.AsDeclared, compare.NotRunByDesign), exitOK},
		{cells(compare.AsDeclared, compare.Inconclusive, compare.NotRunByDesign), exitInconclusive},
		{cells(compare.Inconclusive, compare.Contradiction), exitContradiction},
		{&compare.Result{Interrupted: true, Rows: cells(compare.Contradiction).Rows}, exitInterrupted},
	} {
		got := exitOK
		var ec exitCode
		if err := compareExit(tc.res); errors.As(err, &ec) {
			got = ec.code
		}
		if got != tc.want {
			t.Errorf("%+v: exit %d, want %d", tc.res, got, tc.want)
		}
	}
}

func TestInspectCommand(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.Set("lock.a", strconv.FormatInt(time.Now().Unix()+100, 10))
	mr.Set("lock.b", "0123456789abcdef0123456789abcdef")
	mr.Set("other", "x")
	code, out, errOut := runCLI("inspect", "--redis", mr.Addr(), "--prefix", "lock.")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "lock.a") || !strings.Contains(out, "legacy") || !strings.Contains(out, "live") ||
		!strings.Contains(out, "lock.b") || !strings.Contains(out, "token") || strings.Contains(out, "other") {
		t.Errorf("inspect output:\n%s", out)
	}
	for _, want := range []string{"UNIT", "seconds", "legacy timestamps: 1 in seconds", "needs unit=s"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks the unit (%q):\n%s", want, out)
		}
	}
	// A host without a port means Redis's default port, 6379.
	onDefault := miniredis.NewMiniRedis()
	if err := onDefault.StartAddr("127.0.0.1:6379"); err == nil {
		defer onDefault.Close()
		onDefault.Set("lock.default", "0123456789abcdef0123456789abcdef")
		if code, out, errOut := runCLI("inspect", "--redis", "127.0.0.1", "--prefix", "lock."); code != 0 || !strings.Contains(out, "lock.default") {
			t.Errorf("inspect --redis 127.0.0.1 (a server on 6379): exit %d, stderr %q, output:\n%s", code, errOut, out)
		}
	} else if code, _, errOut := runCLI("inspect", "--redis", "127.0.0.1", "--prefix", "lock."); code != 0 &&
		(!strings.Contains(errOut, "127.0.0.1:6379") || strings.Count(errOut, "inspect") != 1) {
		// Port 6379 is taken: by a Redis the command reached (exit 0), or
		// by something else, which the one error line names.
		t.Errorf("inspect --redis 127.0.0.1 (6379 taken: %v): stderr %q: want one error naming 127.0.0.1:6379", err, errOut)
	}
	// Milliseconds, as npm redis-lock writes them.
	mr.Set("lock.a", strconv.FormatInt(time.Now().UnixMilli()+100_000, 10))
	code, out, errOut = runCLI("inspect", "--redis", mr.Addr(), "--prefix", "lock.")
	if code != 0 || !strings.Contains(out, "milliseconds") || !strings.Contains(out, "needs unit=ms") {
		t.Errorf("milliseconds: exit %d, stderr %s, output:\n%s", code, errOut, out)
	}
}

func TestBenchCommand(t *testing.T) {
	code, out, errOut := runCLI("bench", "--backends", "singleredis,etcdlease", "--duration", "150ms", "--miniredis")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, b := range []string{"singleredis", "etcdlease"} {
		for _, mode := range []string{"serial", "parallel", "contended"} {
			found := false
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) >= 4 && f[0] == b && f[1] == mode {
					found = true
					if ops, err := strconv.ParseFloat(f[2], 64); err != nil || ops <= 0 {
						t.Errorf("%s %s: ops/s %q, want a positive number", b, mode, f[2])
					}
				}
			}
			if !found {
				t.Errorf("no %s %s row in:\n%s", b, mode, out)
			}
		}
	}
}

// TestCompareLogsQuarantine: a restart-safe redlock column whose masters
// restart empty meets the restart-safety quarantine, and the CLI logs it
// once on stderr, with the reason and the time left, and nothing else.
func TestCompareLogsQuarantine(t *testing.T) {
	testserver.NeedRedisServer(t) // the restart needs real processes
	code, _, errOut := runCLI("compare", "--columns", "redlock?restart_safety=true", "--scenarios", "restart-no-persistence")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `msg="restart-safety quarantine"`) ||
		!strings.Contains(lines[0], "reason=") || !strings.Contains(lines[0], "left=") {
		t.Errorf("stderr:\n%s\nwant one line: the restart-safety quarantine with its reason and the time left", errOut)
	}
}

// pauseOnWrite pauses every other client of a Redis (CLIENT PAUSE) when
// the first progress line is written, so that the server stops answering
// halfway through a listing.
type pauseOnWrite struct {
	bytes.Buffer
	pause func()
}

func (p *pauseOnWrite) Write(b []byte) (int, error) {
	if p.Len() == 0 {
		p.pause()
	}
	return p.Buffer.Write(b)
}

// TestInspectCommandTimeout: a server that stops answering halfway through
// the listing ends inspect at --timeout, with the keys listed so far
// printed and an error (exit 1) that says the listing is incomplete and
// which flag bounds it. An interrupted inspect exits 130. Bad --limit and
// --timeout values are usage errors.
func TestInspectCommandTimeout(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	pipe := raw.Pipeline()
	// Enough keys that the listing (two requests each) is still running
	// when the first progress line comes, a second in.
	const keys = 50000
	for i := range keys {
		pipe.Set(ctx, fmt.Sprintf("lock.%05d", i), "0123456789abcdef0123456789abcdef", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	stderr := &pauseOnWrite{pause: func() {
		// Longer than the --timeout below; the server is stopped at the
		// end of the test all the same.
		if err := raw.Do(ctx, "CLIENT", "PAUSE", "10000").Err(); err != nil {
			t.Error(err)
		}
	}}
	var stdout bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"inspect", "--redis", srv.Addr(), "--prefix", "lock.", "--limit", "0", "--timeout", "3s", "--progress"}, &stdout, stderr)
	if code != exitError {
		t.Fatalf("exit %d after %v, want %d; stderr:\n%s", code, time.Since(start), exitError, stderr.String())
	}
	listed := strings.Count(stdout.String(), "\nlock.")
	if listed == 0 || listed >= keys {
		t.Errorf("printed %d keys; want those listed before the server paused, some and not all", listed)
	}
	for _, want := range []string{fmt.Sprintf("listing incomplete (%d keys listed)", listed), "stopped by --timeout 3s"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if want := fmt.Sprintf("listing incomplete: it stopped after %d keys", listed); !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout does not end by saying the listing is incomplete (%q):\n...%s", want, stdout.String()[max(0, stdout.Len()-300):])
	}
	// Ctrl-C (the command's context ends): exit 130.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var errb bytes.Buffer
	if code := run(cancelled, []string{"inspect", "--redis", srv.Addr(), "--prefix", "lock."}, &bytes.Buffer{}, &errb); code != exitInterrupted || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("inspect interrupted: exit %d, stderr %q; want %d, saying so", code, errb.String(), exitInterrupted)
	}
	for _, args := range [][]string{{"--limit", "-1"}, {"--timeout", "0s"}} {
		if code, _, errOut := runCLI(append([]string{"inspect", "--redis", srv.Addr()}, args...)...); code != exitUsage || !strings.Contains(errOut, args[0]) {
			t.Errorf("inspect %v: exit %d, stderr %q; want %d naming %s", args, code, errOut, exitUsage, args[0])
		}
	}
}
