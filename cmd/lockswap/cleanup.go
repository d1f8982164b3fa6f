package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/cleanup"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// cleanupJob is a parsed `lockswap cleanup`.
type cleanupJob struct {
	t         redisTargets
	prefix    string
	olderThan time.Duration
	apply     bool
	timeout   time.Duration
	progress  io.Writer // nil: no progress lines
}

func parseCleanup(args []string, stdout, stderr io.Writer) (job, error) {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	addr := fs.String("redis", "", "Redis address host[:port] or URL redis://[user:password@]host[:port][/db]\n(required; the port defaults to "+inspect.DefaultPort+")")
	prefix := fs.String("prefix", "", "key prefix of the old clients' locks, such as lock. (required; --prefix '' with\n--all-keys for old clients that use none)")
	allKeys := fs.Bool("all-keys", false, "with --prefix '': consider every key of the database (other applications'\ntimestamps look like stale locks too: read the dry run)")
	olderThan := fs.Duration("older-than", 0, "delete legacy keys whose timestamp passed more than this long ago by the server's\nclock, such as 24h (required): longer than any old client's clock is slow")
	apply := fs.Bool("apply", false, "delete; without it, a dry run lists what would be deleted and changes nothing")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long (what was deleted until then stays deleted)")
	showProgress := fs.Bool("progress", false, "print progress on stderr even when it is not a terminal")
	password := fs.String("password", "", "Redis password (a flag shows in ps: prefer REDISCLI_AUTH or REDIS_PASSWORD;\nthe flag or the URL's wins over them, then REDISCLI_AUTH over REDIS_PASSWORD)")
	fs.Usage = commandUsage(fs, "--redis host[:port] --prefix P --older-than D [--apply]",
		"Deletes legacy SETNX/GETSET lock keys under a prefix whose timestamp passed longer\n"+
			"ago than --older-than: old clients never expire them. Dry run unless --apply. Each\n"+
			"key goes only if it still holds the value read (a lock taken again stays); token\n"+
			"locks, fence counters, queue keys, keys with a Redis expiry and other values are\n"+
			"never touched. Refuses a prefix whose legacy keys mix seconds and milliseconds. On\n"+
			"a Redis Cluster it sees the keys of the one node given: run it on each master.")
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *addr == "":
		return nil, usageError("cleanup: --redis host[:port] is required (run \"lockswap cleanup -h\")")
	case !set["prefix"]:
		return nil, usageError("cleanup: --prefix is required (the old clients' key prefix, such as lock.; --prefix '' --all-keys for keys without one)")
	case *prefix == "" && !*allKeys:
		return nil, usageError("cleanup: --prefix '' considers every key of the database: add --all-keys to mean it")
	case *prefix != "" && *allKeys:
		return nil, usageError("cleanup: --all-keys goes with --prefix '' only")
	case *olderThan <= 0:
		return nil, usageError("cleanup: --older-than is required and must be positive, such as 24h (got %v)", *olderThan)
	case *timeout <= 0:
		return nil, usageError("cleanup: --timeout %v must be positive", *timeout)
	}
	t, err := parseRedisFlag("cleanup", []string{*addr}, *password, true)
	if err != nil {
		return nil, err
	}
	j := cleanupJob{t: t, prefix: *prefix, olderThan: *olderThan, apply: *apply, timeout: *timeout}
	if *showProgress || isTerminal(stderr) {
		j.progress = stderr
	}
	return func(ctx context.Context) error { return j.run(ctx, stdout) }, nil
}

// run plans the cleanup, prints the plan and, with --apply, deletes.
func (j cleanupJob) run(ctx context.Context, stdout io.Writer) error {
	c := redis.NewClient(&redis.Options{Addr: j.t.addrs[0], Username: j.t.user, Password: j.t.password, DB: j.t.db, ContextTimeoutEnabled: true})
	defer c.Close()
	rc := goredis.New(c)
	cctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	var listed func(listed, calls int)
	if j.progress != nil {
		listed = listProgress(j.progress, "cleanup", time.Second)
	}
	p, err := cleanup.Find(cctx, rc, j.prefix, j.olderThan, listed)
	if err != nil {
		return j.failed(ctx, cctx, "nothing was deleted", err)
	}
	if err := cleanup.PrintPlan(stdout, p); err != nil {
		return err
	}
	if !j.apply {
		_, err := fmt.Fprintf(stdout, "dry run: nothing deleted; run again with --apply to delete the %d stale keys (each only if it still holds the value shown)\n", len(p.Candidates))
		return err
	}
	var deleted func(int)
	if j.progress != nil {
		deleted = deleteProgress(j.progress, len(p.Candidates), time.Second)
	}
	r, err := cleanup.Delete(cctx, rc, p.Candidates, deleted)
	if perr := cleanup.PrintResult(stdout, p, r); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		// The call that was cut short may have deleted its key too.
		return j.failed(ctx, cctx, fmt.Sprintf("at least %d keys were deleted before it stopped", r.Deleted), err)
	}
	return nil
}

// failed is the error of a cleanup that stopped: interrupted (exit 130),
// at --timeout, or at a failure (with a hint when the login was refused).
func (j cleanupJob) failed(ctx, cctx context.Context, done string, err error) error {
	switch {
	case ctx.Err() != nil:
		return exitCode{exitInterrupted, "cleanup: interrupted; " + done}
	case cctx.Err() != nil:
		return fmt.Errorf("%w (stopped by --timeout %v; %s: raise it, or narrow --prefix)", err, j.timeout, done)
	}
	return authHint(err, j.t)
}

// deleteProgress returns a cleanup.Delete progress function that writes a
// line to w at most once per every.
func deleteProgress(w io.Writer, total int, every time.Duration) func(done int) {
	last := time.Now()
	return func(done int) {
		if now := time.Now(); now.Sub(last) >= every {
			last = now
			fmt.Fprintf(w, "cleanup: %d of %d stale keys done ...\n", done, total)
		}
	}
}
