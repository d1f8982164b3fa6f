package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/soak"
)

func parseSoak(args []string, stdout, stderr io.Writer) (job, error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	duration := fs.Duration("duration", soak.DefaultDuration, "time per configuration and load")
	configs := fs.String("configs", "", "comma-separated configurations to run, path.Match globs over backend/ttl/client\n(such as redlock3+fence/300ms/redigo, */*/rueidis; a pattern without / matches the backend,\nsuch as singleredis*) (default all)")
	load := fs.String("load", "both", "idle, hogs, or both (each configuration idle, then at once beside the hogs)")
	hogs := fs.Int("hogs", soak.DefaultHogs, "CPU hogs (child processes) beside the cycles under --load hogs")
	deadline := fs.Duration("deadline", soak.DefaultDeadline, "deadline of each Acquire and each Release")
	goroutines := fs.Int("goroutines", soak.DefaultGoroutines, "goroutines running cycles, each on its own keys")
	list := fs.Bool("list", false, "list the configurations and exit")
	showProgress := fs.Bool("progress", false, "print progress on stderr even when it is not a terminal")
	fs.Usage = commandUsage(fs, "[flags]",
		`Runs acquire+release cycles of every backend and Redis client on servers it starts
(redis-server processes, embedded etcd), idle and beside CPU hogs, and reports per
configuration cycles/s, CPU per cycle, errors, release errors and lock keys left
behind. The floor/1s/<client> configurations run each Redis client alone (SET NX
with the TTL, release script): what the machine leaves any client beside the
hogs; they are shown, not judged. Target: 0 errors, 0 lock keys left, hogs
cycles/s at least half of idle. Exit 1 when a configuration other than a floor
misses it.`)
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	switch {
	case *duration <= 0:
		return nil, usageError("soak: --duration %v: want a positive duration such as 60s", *duration)
	case *deadline <= 0:
		return nil, usageError("soak: --deadline %v: want a positive duration such as 3s", *deadline)
	case *hogs < 1:
		return nil, usageError("soak: --hogs %d: want at least 1", *hogs)
	case *goroutines < 1:
		return nil, usageError("soak: --goroutines %d: want at least 1", *goroutines)
	}
	o := soak.Options{Duration: *duration, Deadline: *deadline, Hogs: *hogs, Goroutines: *goroutines}
	switch *load {
	case "both":
		o.Loads = []soak.Load{soak.Idle, soak.Hogs}
	case "idle", "hogs":
		o.Loads = []soak.Load{soak.Load(*load)}
	default:
		return nil, usageError("soak: --load %q: want idle, hogs or both", *load)
	}
	var err error
	if o.Configs, err = soak.Select(soak.Configs(), splitList(*configs)); err != nil {
		return nil, usageError("soak: --configs: %v", err)
	}
	if *list {
		return func(context.Context) error {
			for _, c := range o.Configs {
				fmt.Fprintln(stdout, c.Name())
			}
			return nil
		}, nil
	}
	if *showProgress || isTerminal(stderr) {
		o.Progress = stderr
	}
	return func(ctx context.Context) error { return runSoak(ctx, o, stdout) }, nil
}

// runSoak runs the soak o and prints its report on stdout.
func runSoak(ctx context.Context, o soak.Options, stdout io.Writer) error {
	start := time.Now()
	rep, err := soak.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := soak.Write(stdout, rep); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "(%d runs in %v)\n", len(rep.Results), time.Since(start).Round(time.Second))
	switch missed := rep.Missed(); {
	case rep.Interrupted:
		return exitCode{exitInterrupted, "soak: interrupted; printed what was measured so far"}
	case len(missed) > 0:
		return fmt.Errorf("soak: %d configuration(s) missed the target (see the report)", len(missed))
	}
	return nil
}

// parseSoakHog is the hidden command soak.HogCommand: a CPU hog that the
// soak starts as a child process and stops by its PID. It takes no
// arguments and ignores any.
func parseSoakHog(_ []string, _, _ io.Writer) (job, error) {
	return func(ctx context.Context) error { return soak.Hog(ctx, os.Stdin) }, nil
}
