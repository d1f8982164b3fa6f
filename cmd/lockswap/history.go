package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/historyrun"
)

func parseHistory(args []string, stdout, stderr io.Writer) (job, error) {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	duration := fs.Duration("for", historyrun.DefaultDuration, "how long each configuration runs its workload beside the nemesis")
	configs := fs.String("configs", "", "comma-separated configurations to run, path.Match globs over their names\n(such as singleredis*, redlock3+fence) (default all; --list names them)")
	clients := fs.Int("clients", historyrun.DefaultClients, "clients (Lockers, each with its own connections) taking the same two keys")
	seed := fs.Uint64("seed", 0, "seed of the fault schedules, to replay a run (0: a new one, printed)")
	out := fs.String("out", "", "folder for the histories and Porcupine's views of a violation (default: the system's temporary folder)")
	list := fs.Bool("list", false, "list the configurations and exit")
	showProgress := fs.Bool("progress", false, "print progress and the faults on stderr even when it is not a terminal")
	fs.Usage = commandUsage(fs, "[flags]",
		`Runs each backend configuration on servers it starts (redis-server processes; the
etcd program on PATH, else an embedded etcd), every server behind a proxy. Several
clients read and increment a register under the lock (one critical section, one
recorded operation) while a seeded nemesis pauses a server (SIGSTOP), restarts it
without its data, delays or cuts off its replies, and one section in ten pauses
its holder past its lock. Porcupine then checks the recorded history, and the
verdict is set against the configuration's Guarantees: with fences (the register
refuses a fence below the highest it saw) the history must be linearizable with
fences rising; without, a lost update is the declared weakness of a lease when
the schedule drew what causes it. A violation writes the history (JSON lines,
docs/history.md) and Porcupine's view of each failing key (HTML), with the seed
that replays the schedule.`)
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	switch {
	case *duration <= 0:
		return nil, usageError("history: --for %v: want a positive duration such as 30s", *duration)
	case *clients < 2:
		return nil, usageError("history: --clients %d: want at least 2", *clients)
	}
	cs, err := historyrun.Select(historyrun.Configs(), splitList(*configs))
	if err != nil {
		return nil, usageError("history: --configs: %v", err)
	}
	if *list {
		return func(context.Context) error {
			for _, c := range cs {
				fmt.Fprintf(stdout, "%s\t%s\n", c.Name, c.Servers)
			}
			return nil
		}, nil
	}
	o := historyrun.Options{Configs: cs, Duration: *duration, Clients: *clients, Seed: *seed, Out: *out}
	if *showProgress || isTerminal(stderr) {
		o.Progress = stderr
	}
	return func(ctx context.Context) error {
		start := time.Now()
		rs, err := historyrun.Run(ctx, o)
		if werr := historyrun.Write(stdout, rs); werr != nil && err == nil {
			err = werr
		}
		fmt.Fprintf(stdout, "\ntook %v\n", time.Since(start).Round(time.Second))
		switch {
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			return exitCode{exitInterrupted, "history: interrupted; printed the configurations checked so far"}
		case err != nil:
			return fmt.Errorf("history: %w", err)
		}
		switch historyrun.ExitCode(rs) {
		case 3:
			return exitCode{exitContradiction, "history: a history contradicts its configuration's declared guarantees"}
		case 4:
			return exitCode{exitInconclusive, "history: a history could not be decided within the checker's budget"}
		}
		return nil
	}, nil
}
