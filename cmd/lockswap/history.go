package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/historyrun"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
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
	userFlags := addUserServerFlags(fs, ": only the faults on the clients' side are drawn",
		"your own etcd endpoint host:port (plain text; the first of a list is used) instead of\na started one: only the faults on the clients' side are drawn")
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
that replays the schedule.

With --redis or --etcd it runs on your servers instead, each behind a proxy it starts,
with only the faults that stay on the clients' side: the proxy's delay and cut, holder
pauses, legacysetnx's clock jumps. Keys go under a random prefix, deleted at the end.`)
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	switch {
	case *duration <= 0:
		return nil, usageError("history: --for %v: want a positive duration such as 30s", *duration)
	case *clients < 2:
		return nil, usageError("history: --clients %d: want at least 2", *clients)
	}
	var (
		user  userservers.Servers
		on    strings.Builder // the flags that name them, for a replay
		login string          // how to log in again, for a replay
	)
	t, etcd, err := userFlags.parse("history", false)
	if err != nil {
		return nil, err
	}
	if len(t.addrs) > 0 {
		user.Redis, user.Auth = t.addrs, userservers.Auth{User: t.user, Password: t.password, From: t.from}
		fmt.Fprintf(&on, " --redis %s", strings.Join(t.addrs, ","))
		if t.password != "" {
			login = "give the same login again: " + redisAuthHelp
			if t.user != "" {
				login += fmt.Sprintf(", user %q in a redis://user:password@host URL", t.user)
			}
		}
	}
	user.Etcd = etcd
	all := historyrun.Configs()
	if len(user.Etcd) > 0 {
		fmt.Fprintf(&on, " --etcd %s", strings.Join(user.Etcd, ","))
	}
	if on.Len() > 0 {
		all = historyrun.ConfigsOn(user)
		if len(all) == 0 {
			return nil, usageError("history: no configuration runs on the servers given")
		}
	}
	cs, err := historyrun.Select(all, splitList(*configs))
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
	o := historyrun.Options{Configs: cs, Duration: *duration, Clients: *clients, Seed: *seed, Out: *out, On: on.String(), Login: login}
	if *showProgress || isTerminal(stderr) {
		o.Progress = stderr
	}
	return func(ctx context.Context) error {
		if err := user.Check(ctx, "history"); err != nil {
			if errors.Is(err, lockswap.ErrUnavailable) {
				return exitCode{exitInconclusive, err.Error()}
			}
			return err
		}
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
		var left []string
		for _, r := range rs {
			if r.KeysLeft != "" {
				left = append(left, r.Config)
			}
		}
		switch historyrun.ExitCode(rs) {
		case 0:
			if len(left) > 0 {
				return fmt.Errorf("history: keys are left on your servers by %s (printed above)", strings.Join(left, ", "))
			}
		case 3:
			return exitCode{exitContradiction, "history: a history contradicts its configuration's declared guarantees"}
		case 4:
			return exitCode{exitInconclusive, "history: a history could not be decided within the checker's budget"}
		}
		return nil
	}, nil
}
