// Command lockswap compares lock backends under faults, benchmarks them,
// and inspects lock keys in Redis.
//
//	lockswap compare [--backends a,b] [--scenarios x,y] [--format table|markdown|json] [--iterations N] [--miniredis] [--redis h:p,...] [--etcd h:p,...]
//	lockswap bench   [--backends a,b] [--duration 2s]
//	lockswap inspect --redis host[:6379] [--prefix lock.]
//	lockswap version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/compare"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: lockswap <command> [flags]

commands:
  compare   run fault scenarios against every backend; print measured vs declared guarantees
  bench     acquire/release latency and throughput per backend
  inspect   list lock keys under a prefix in a Redis, with the unit (s or ms) of legacy timestamps
  version   print the module version, VCS revision and Go version of this binary

run "lockswap <command> -h" for a command's flags`)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "compare":
		err = runCompare(ctx, args[1:], stdout, stderr)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case "inspect":
		err = runInspect(ctx, args[1:], stdout, stderr)
	case "version":
		err = runVersion(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "lockswap: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	var ec exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		fmt.Fprintln(stderr, "lockswap:", err)
		return int(ec.code)
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintln(stderr, "lockswap:", err)
		return 1
	}
}

type exitCode struct {
	code int
	msg  string
}

func (e exitCode) Error() string { return e.msg }

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

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backends := fs.String("backends", "", "comma-separated backends (default all: "+strings.Join(compare.BackendNames(), ",")+")")
	scenarios := fs.String("scenarios", "", "comma-separated scenarios (default all: "+strings.Join(compare.ScenarioNames(), ",")+")")
	format := fs.String("format", "table", "output format: table, markdown or json")
	iterations := fs.Int("iterations", 20, "critical sections per goroutine in the contention scenario")
	useMini := fs.Bool("miniredis", false, "use miniredis even when redis-server is on PATH (scenarios that need real processes are not run)")
	progress := fs.Bool("progress", false, "print progress on stderr even when it is not a terminal")
	redisAddrs := fs.String("redis", "", "your own Redis servers host:port[,host:port...] instead of started ones (scenarios that harm servers are not run)")
	etcdEndpoints := fs.String("etcd", "", "your own etcd endpoints host:port[,...] instead of an embedded one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *format {
	case "table", "markdown", "json":
	default:
		return exitCode{2, fmt.Sprintf("compare: --format %q: want table, markdown or json", *format)}
	}
	o := compare.Options{Backends: splitList(*backends), Scenarios: splitList(*scenarios), Iterations: *iterations, Miniredis: *useMini,
		RedisAddrs: splitList(*redisAddrs), EtcdEndpoints: splitList(*etcdEndpoints)}
	if *progress || isTerminal(stderr) {
		o.Progress = stderr
	}
	start := time.Now()
	res, err := compare.Run(ctx, o)
	if err != nil {
		return err
	}
	switch *format {
	case "markdown":
		err = res.WriteMarkdown(stdout)
	case "json":
		err = res.WriteJSON(stdout)
	default:
		err = res.WriteTable(stdout)
		fmt.Fprintf(stdout, "\n(%d scenarios × %d backends in %v)\n", len(res.Rows), len(res.Backends), time.Since(start).Round(time.Second))
	}
	if err != nil {
		return err
	}
	if n := res.Contradictions(); n > 0 {
		return exitCode{3, fmt.Sprintf("compare: %d measurement(s) contradict the declared guarantees", n)}
	}
	return nil
}
