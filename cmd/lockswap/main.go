// Command lockswap compares lock backend configurations under faults,
// benchmarks them, and inspects and cleans up lock keys in Redis.
//
//	lockswap compare [--columns spec,...] [--scenarios x,y] [--format table|markdown|json] [--iterations N] [--budget D] [--miniredis] [--redis h:p,...] [--etcd h:p,...]
//	lockswap bench   [--backends a,b] [--duration 1s]
//	lockswap soak    [--configs pattern,...] [--duration 60s] [--load idle|hogs|both]
//	lockswap history [--configs pattern,...] [--for 30s] [--seed N] [--out DIR] [--redis h:p,...] [--etcd h:p]
//	lockswap inspect --redis host[:6379] [--prefix lock.]
//	lockswap cleanup --redis host[:6379] --prefix lock. --older-than 24h [--apply]
//	lockswap dev etcd [--listen 127.0.0.1:2379] [--data-dir DIR]
//	lockswap version
//
// compare logs on stderr, through log/slog, the waits a person did not ask
// for (redlock's restart-safety quarantine, with its reason and the time
// left); the libraries' other records are not shown.
//
// Exit codes: 0 success (compare: every cell as declared); 1 an error;
// 2 a usage mistake; 3 (compare, history) a measurement contradicts a
// declaration; 4 (compare) some cells inconclusive and none contradicts
// (history: a history undecided within the checker's budget), or the
// servers given with --redis or --etcd do not answer; inspect: 3 MIXED
// units, 4 a listing cut at --limit, 5 an old client seen with
// --fail-on-old-client; 130 interrupted (compare prints what it measured
// so far).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/compare"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/soak"
	"github.com/lockswap/lockswap/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first Ctrl-C cancels ctx (compare then prints what it has
		// measured); a second one ends the program at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: lockswap <command> [flags]

commands:
  compare   run fault scenarios against backend configurations: measured vs declared guarantees
  bench     acquire/release latency and throughput per backend
  soak      every backend and Redis client, idle and beside CPU hogs: cycles/s, errors, keys left
  history   every backend under a seeded nemesis: recorded histories checked with Porcupine
  inspect   list lock keys under a prefix in a Redis, with the unit (s or ms) of legacy timestamps
  cleanup   delete long-expired legacy lock keys that old clients left behind (dry run by default)
  dev       run a server to try lockswap against: lockswap dev etcd (an embedded etcd, until Ctrl-C)
  version   print the module version, VCS revision and Go version of this binary

run "lockswap <command> -h" for a command's flags

`+exitCodesHelp)
}

// exitCodesHelp is the exit codes, as -h prints them.
const exitCodesHelp = `exit codes:
  0    success (compare: every measured cell is as declared)
  1    an error (for example servers that compare could not start)
  2    usage mistake: unknown command, flag, backend, column or scenario, bad value
  3    compare: a measurement contradicts the declared guarantees;
       inspect: MIXED units
  4    compare: some cells are inconclusive (setup failed, servers unreachable,
       time budget used up, too few iterations) and none contradicts;
       inspect: the listing stopped at --limit
  5    inspect --fail-on-old-client: a live legacy lock of an old client
  130  interrupted (Ctrl-C); compare prints what it measured so far, inspect
       the keys it listed so far (and at its --timeout, with exit 1), cleanup
       what it deleted so far`

// Exit codes.
const (
	exitOK            = 0
	exitError         = 1
	exitUsage         = 2
	exitContradiction = 3
	exitInconclusive  = 4
	exitInterrupted   = 130
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	}
	parse, ok := commands[args[0]]
	if !ok {
		fmt.Fprintln(stderr, redact.String(fmt.Sprintf("lockswap: unknown command %q (want compare, bench, soak, history, inspect, cleanup, dev or version; run \"lockswap -h\")", args[0])))
		return exitUsage
	}
	job, err := parse(args[1:], stdout, stderr)
	if err == nil {
		err = job(ctx)
	}
	return report(stderr, args[0], err)
}

// report writes err, if any, on stderr with passwords hidden
// (redact.String: messages repeat what the user typed), and returns the
// exit code it stands for.
func report(stderr io.Writer, command string, err error) int {
	code, msg := exitOK, ""
	var ec exitCode
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ec):
		code, msg = ec.code, err.Error()
	case errors.Is(err, compare.ErrUsage):
		code, msg = exitUsage, command+": "+err.Error()
	default:
		code, msg = exitError, err.Error()
	}
	fmt.Fprintln(stderr, "lockswap:", redact.String(msg))
	return code
}

// A parser reads a command's arguments and returns its job: the flags
// are checked, -h is answered on stdout, and nothing is started, dialed or
// written elsewhere until the job runs, so that a parser can be fuzzed
// (FuzzCLIFlags). The job writes its results on stdout and its progress
// and logs on stderr.
type parser func(args []string, stdout, stderr io.Writer) (job, error)

// A job is a parsed command's work.
type job func(ctx context.Context) error

// commands are the parsers of the commands, by name.
var commands = map[string]parser{
	"compare":       parseCompare,
	"bench":         parseBench,
	"soak":          parseSoak,
	"history":       parseHistory,
	soak.HogCommand: parseSoakHog, // hidden: a CPU hog that soak starts
	"inspect":       parseInspect,
	"cleanup":       parseCleanup,
	"version":       parseVersion,
	"dev":           parseDev,
}

// exitCode is an error that sets the exit code.
type exitCode struct {
	code int
	msg  string
}

func (e exitCode) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return exitCode{exitUsage, fmt.Sprintf(format, args...)}
}

// parseFlags parses a command's flags. -h prints the command's help on
// stdout (flag.ErrHelp: exit 0); a mistake is one line on stderr (exit 2).
// A command takes no positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return err
	}
	if err != nil {
		return usageError("%s: %v (run \"lockswap %s -h\")", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		if i := len(args) - fs.NArg(); i > 0 && isPasswordFlag(args[i-1]) {
			// --password was the value of the flag before it, so this
			// is the password: do not repeat it.
			return usageError("%s: unexpected argument after %s: it takes only flags (run \"lockswap %s -h\")", fs.Name(), args[i-1], fs.Name())
		}
		return usageError("%s: unexpected argument %q: it takes only flags (run \"lockswap %s -h\")", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// isPasswordFlag reports whether arg is the flag --password without its
// value (-password, --password, --password=), so that the argument after it
// is the password.
func isPasswordFlag(arg string) bool {
	if !strings.HasPrefix(arg, "-") {
		return false
	}
	name, value, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name == "password" && value == ""
}

// commandUsage makes a FlagSet's Usage: what the command does, its flags,
// the exit codes.
func commandUsage(fs *flag.FlagSet, synopsis, about string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: lockswap %s %s\n\n%s\n", fs.Name(), synopsis, about)
		hasFlags := false
		fs.VisitAll(func(f *flag.Flag) {
			hasFlags = true
			f.Usage = wrapText(f.Usage, usageWidth)
		})
		if hasFlags {
			fmt.Fprintf(w, "\nflags:\n")
			fs.PrintDefaults()
		}
		fmt.Fprintf(w, "\n%s\n", commandExitCodes(fs.Name()))
	}
}

// usageWidth is the longest line of a flag's description in -h: the flag
// package indents it by four spaces and a tab (8 columns on a terminal),
// and the lines must fit in 100 columns, its " (default ...)" included.
const usageWidth = 76

// wrapText reflows s, a flag's description, into lines of at most width
// runes, broken at spaces (its own line breaks count as spaces), so that
// -h fits a terminal.
func wrapText(s string, width int) string {
	var b strings.Builder
	line := strings.ReplaceAll(s, "\n", " ")
	for utf8.RuneCountInString(line) > width {
		cut := strings.LastIndexByte(prefixRunes(line, width+1), ' ')
		if cut <= 0 {
			break // one word longer than width: left as it is
		}
		b.WriteString(line[:cut])
		b.WriteByte('\n')
		line = line[cut+1:]
	}
	b.WriteString(line)
	return b.String()
}

// prefixRunes returns the first n runes of s (all of s when shorter).
func prefixRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// commandExitCodes is the exit codes command can end with, as its -h
// prints them.
func commandExitCodes(command string) string {
	const (
		ok          = "  0    success\n"
		failed      = "  1    an error\n"
		usage       = "  2    usage mistake: unknown flag, bad value\n"
		interrupted = "  130  interrupted (Ctrl-C)"
	)
	codes := ok + failed + usage
	switch command {
	case "compare":
		codes = "  0    every measured cell is as declared\n" +
			"  1    an error (for example servers that compare could not start, or that refused the login)\n" +
			usage +
			"  3    a measurement contradicts the declared guarantees\n" +
			"  4    some cells are inconclusive (setup failed, servers unreachable, time budget\n" +
			"       used up, too few iterations) and none contradicts\n" +
			interrupted + "; prints what it measured so far"
	case "inspect":
		codes = "  0    every matching key was listed, and its legacy timestamps agree on the unit\n" +
			"  1    an error: the server unreachable, the login refused, or --timeout reached\n" +
			"       (the keys listed so far are printed)\n" +
			usage +
			"  3    MIXED units: legacy timestamps in seconds and in milliseconds\n" +
			"  4    the listing stopped at --limit: other keys may match\n" +
			"  5    --fail-on-old-client: a live legacy lock without a Redis expiry (an old client)\n" +
			"       (when several apply: 3, then 5, then 4)\n" +
			interrupted + "; prints the keys listed so far"
	case "cleanup":
		codes = "  0    done: the dry run listed the stale keys, or --apply deleted them\n" +
			"  1    an error: the server unreachable, the login refused, MIXED units, or\n" +
			"       --timeout reached (what was deleted until then is printed)\n" +
			usage + interrupted + "; prints what was deleted so far"
	case "bench":
		codes = ok + "  1    an error, or a measurement failed (named after the table)\n" + usage +
			interrupted + "; prints what it measured so far"
	case "history":
		codes = "  0    every history is as its configuration declares\n" + failed + usage +
			"  3    a history contradicts its configuration's declared guarantees\n" +
			"  4    a history could not be decided within the checker's budget, and none contradicts;\n" +
			"       or your --redis/--etcd servers do not answer (nothing was run)\n" +
			interrupted + "; prints the configurations checked so far"
	case "soak":
		codes = "  0    every configuration met the target\n" +
			"  1    a configuration missed it, or an error\n" + usage +
			interrupted + "; prints what it measured so far"
	case "dev etcd":
		codes = "  0    stopped by Ctrl-C\n" + failed + usage
	case "version":
		codes = ok + "  1    the binary carries no build information\n" + usage
	}
	return "exit codes:\n" + strings.TrimRight(codes, "\n")
}

// plainAddrs refuses an address of flag --name that has user information
// (an "@"), or that is a URL unless urls, without repeating it: it may
// hold a password.
func plainAddrs(cmd, name string, addrs []string, urls bool) error {
	for i, a := range addrs {
		switch {
		case strings.Contains(a, "@"):
			return usageError("%s: --%s: address %d of %d has user information (a user or password before an at sign): give the address alone (it is not repeated here: it may hold a password)", cmd, name, i+1, len(addrs))
		case !urls && strings.Contains(a, "://"):
			return usageError("%s: --%s: address %d of %d is a URL: give host:port", cmd, name, i+1, len(addrs))
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func parseCompare(args []string, stdout, stderr io.Writer) (job, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	columns := fs.String("columns", "", "comma-separated configurations to compare, each a backend and the URL parameters a user\nwould set, such as redlock?restart_safety=true or legacysetnx?unit=ms (default: "+strings.Join(compare.DefaultColumns, ", ")+"); a column with restart_safety=true and no max_ttl runs with max_ttl="+compare.RedlockMaxTTL.String())
	backends := fs.String("backends", "", "shorthand for --columns: each named backend in its default configuration\n("+strings.Join(compare.BackendNames(), ", ")+")")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios (default all: "+strings.Join(compare.ScenarioNames(), ", ")+")")
	format := fs.String("format", "table", "output format: table, markdown or json")
	kind := fs.String("kind", compare.KindMutex, "what the scenarios take: "+strings.Join(compare.Kinds(), ", ")+" (a permit of a counting semaphore of limit 1,\nor a read-write lock's write hold; a backend without it is n/a)")
	iterations := fs.Int("iterations", compare.DefaultIterations, "critical sections per goroutine in the contention scenario (at least 1)")
	perIteration := compare.DefaultBudget(2) - compare.DefaultBudget(1)
	budget := fs.Duration("budget", 0, fmt.Sprintf("the longest one cell may take before it is inconclusive (default %v plus %v per iteration)",
		compare.DefaultBudget(1)-perIteration, perIteration))
	useMini := fs.Bool("miniredis", false, "use miniredis even when redis-server is on PATH (scenarios that need real processes are not run)")
	showProgress := fs.Bool("progress", false, "print progress on stderr even when it is not a terminal")
	userFlags := addUserServerFlags(fs, " (scenarios that harm servers are not run)", "your own etcd endpoints host:port[,...] instead of an embedded one")
	fs.Usage = commandUsage(fs, "[flags]",
		`Runs fault scenarios (rows) against lock configurations (columns) on servers it starts
(real redis-server processes when on PATH, else miniredis; embedded etcd) and shows what
each measured beside what the configuration's Guarantees() declare.`)
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	switch *format {
	case "table", "markdown", "json":
	default:
		return nil, usageError("compare: --format %q: want table, markdown or json", *format)
	}
	if *iterations < 1 {
		return nil, usageError("compare: --iterations %d: want at least 1", *iterations)
	}
	if *budget < 0 || (*budget == 0 && isSet(fs, "budget")) {
		return nil, usageError("compare: --budget %v: want a positive duration such as 2m", *budget)
	}
	o := compare.Options{Columns: splitList(*columns), Backends: splitList(*backends), Scenarios: splitList(*scenarios),
		Iterations: *iterations, Budget: *budget, Miniredis: *useMini, Kind: *kind}
	if len(o.Columns) > 0 && len(o.Backends) > 0 {
		return nil, usageError("compare: give --columns or --backends, not both")
	}
	t, etcd, err := userFlags.parse("compare", true)
	if err != nil {
		return nil, err
	}
	o.RedisAddrs, o.RedisUsername, o.RedisPassword, o.RedisPasswordFrom = t.addrs, t.user, t.password, t.from
	o.EtcdEndpoints = etcd
	if err := compare.Check(o); err != nil {
		return nil, err
	}
	if *showProgress || isTerminal(stderr) {
		o.Progress = stderr
	}
	// Waits nobody asked for (redlock's restart-safety quarantine) are
	// logged on stderr, with the reason and the time left; compare lets
	// only those records through.
	o.Log = slog.NewTextHandler(stderr, nil)
	return func(ctx context.Context) error { return runCompare(ctx, o, *format, stdout) }, nil
}

// runCompare runs compare with o and prints the result on stdout in
// format.
func runCompare(ctx context.Context, o compare.Options, format string, stdout io.Writer) error {
	start := time.Now()
	res, err := compare.Run(ctx, o)
	if res == nil {
		if errors.Is(err, lockswap.ErrUnavailable) {
			// The servers given with --redis or --etcd do not answer:
			// nothing could be measured, which is inconclusive.
			return exitCode{exitInconclusive, err.Error()}
		}
		return err
	}
	switch format {
	case "markdown":
		err = res.WriteMarkdown(stdout)
	case "json":
		err = res.WriteJSON(stdout)
	default:
		err = res.WriteTable(stdout)
		fmt.Fprintf(stdout, "\n(%d scenarios × %d columns in %v)\n", len(res.Rows), len(res.Columns), time.Since(start).Round(time.Second))
	}
	if err != nil {
		return err
	}
	return compareExit(res)
}

// compareExit is compare's exit: interrupted (130), a contradiction (3),
// only inconclusive cells (4), or nil when every measured cell is as
// declared.
func compareExit(res *compare.Result) error {
	switch n, m := res.Contradictions(), res.Inconclusives(); {
	case res.Interrupted:
		return exitCode{exitInterrupted, "compare: interrupted; printed what was measured so far"}
	case n > 0:
		return exitCode{exitContradiction, fmt.Sprintf("compare: %d measurement(s) contradict the declared guarantees", n)}
	case m > 0:
		return exitCode{exitInconclusive, fmt.Sprintf("compare: %d cell(s) inconclusive (see the notes); no contradiction", m)}
	}
	return nil
}

// isSet reports whether the flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
