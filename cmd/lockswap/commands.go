package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/compare"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

func parseBench(args []string, stdout, stderr io.Writer) (job, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	backends := fs.String("backends", "", "comma-separated backends, each in its default configuration (default all: "+strings.Join(compare.BackendNames(), ", ")+")")
	duration := fs.Duration("duration", time.Second, "time per measurement")
	useMini := fs.Bool("miniredis", false, "use miniredis even when redis-server is on PATH")
	fs.Usage = commandUsage(fs, "[flags]", "Measures acquire+release cycles per backend (serial, parallel, contended) on the\nsame kind of servers compare starts.\n\n"+compare.BenchLegend)
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	if *duration <= 0 {
		return nil, usageError("bench: --duration %v: want a positive duration such as 1s", *duration)
	}
	o := compare.BenchOptions{Backends: splitList(*backends), Duration: *duration, Miniredis: *useMini}
	if _, err := compare.ShorthandColumns(o.Backends); err != nil {
		return nil, usageError("bench: %v", err)
	}
	if isTerminal(stderr) {
		o.Progress = stderr
	}
	return func(ctx context.Context) error {
		rows, env, err := compare.Bench(ctx, o)
		if err != nil {
			return err
		}
		err = compare.WriteBench(stdout, rows, env)
		if ctx.Err() != nil {
			// Ctrl-C: the measurements it cut short are marked failed.
			return exitCode{exitInterrupted, "bench: interrupted; printed what it measured so far"}
		}
		return err
	}, nil
}

func parseInspect(args []string, stdout, stderr io.Writer) (job, error) {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	addr := fs.String("redis", "", "Redis address host[:port] or URL redis://[user:password@]host[:port][/db]\n(required; the port defaults to "+inspect.DefaultPort+")")
	prefix := fs.String("prefix", "", "key prefix to list, e.g. lock.")
	limit := fs.Int("limit", 1000, "list at most this many keys (0: all); when others may match, the output says so\n(exit 4)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long, printing the keys listed so far")
	showProgress := fs.Bool("progress", false, "print progress on stderr even when it is not a terminal")
	password := fs.String("password", "", "Redis password (a flag shows in ps: prefer REDISCLI_AUTH or REDIS_PASSWORD;\nthe flag or the URL's wins over them, then REDISCLI_AUTH over REDIS_PASSWORD)")
	failOnOld := fs.Bool("fail-on-old-client", false, "exit 5 when a live legacy lock has no Redis expiry: an old client holds it (or a\nlockswap client without redis_expiry=true); run it with --limit 0")
	fs.Usage = commandUsage(fs, "--redis host[:port] [flags]", "Lists lock keys under a prefix in a Redis server, with the unit (s or ms) of legacy\ntimestamps and who wrote them: an old client (no Redis expiry) or lockswap.")
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	switch {
	case *addr == "":
		return nil, usageError("inspect: --redis host[:port] is required (run \"lockswap inspect -h\")")
	case *limit < 0:
		return nil, usageError("inspect: --limit %d is negative (0 lists every key)", *limit)
	case *timeout <= 0:
		return nil, usageError("inspect: --timeout %v must be positive", *timeout)
	}
	t, err := parseRedisFlag("inspect", []string{*addr}, *password, true)
	if err != nil {
		return nil, err
	}
	q := inspect.Query{Prefix: *prefix, Limit: *limit}
	if *showProgress || isTerminal(stderr) {
		q.Progress = listProgress(stderr, "inspect", time.Second)
	}
	return func(ctx context.Context) error {
		l, err := runInspect(ctx, t, q, *timeout, stdout)
		if err != nil {
			return err
		}
		return inspectVerdict(l, *limit, *failOnOld)
	}, nil
}

// The exit codes of inspect beyond 0, 1, 2 and 130.
const (
	exitInspectMixed   = 3 // legacy timestamps in both units
	exitInspectCut     = 4 // the listing stopped at --limit
	exitInspectOldSeen = 5 // --fail-on-old-client: a live legacy lock without a Redis expiry
)

// inspectVerdict is the exit code of a listing printed in full, the most
// serious first: MIXED units, an old client seen (with failOnOld), the
// listing cut at --limit (which never passes failOnOld's check: others may
// match).
func inspectVerdict(l inspect.Listing, limit int, failOnOld bool) error {
	s := inspect.Summarize(l.Entries)
	switch {
	case s.Seconds > 0 && s.Milliseconds > 0:
		return exitCode{exitInspectMixed, fmt.Sprintf("inspect: MIXED units: %d legacy timestamps in seconds and %d in milliseconds: the clients misread each other's locks", s.Seconds, s.Milliseconds)}
	case failOnOld && s.LiveOld > 0:
		return exitCode{exitInspectOldSeen, fmt.Sprintf("inspect: %d live legacy locks without a Redis expiry: an old client holds them (or a lockswap client whose legacy URL lacks redis_expiry=true)", s.LiveOld)}
	case l.More:
		return exitCode{exitInspectCut, fmt.Sprintf("inspect: stopped at --limit %d: other keys may match (--limit 0 lists them all)", limit)}
	}
	return nil
}

// runInspect lists the keys of q on the server of t within timeout and
// prints them on stdout, and returns the listing.
func runInspect(ctx context.Context, t redisTargets, q inspect.Query, timeout time.Duration, stdout io.Writer) (inspect.Listing, error) {
	c := redis.NewClient(&redis.Options{Addr: t.addrs[0], Username: t.user, Password: t.password, DB: t.db, ContextTimeoutEnabled: true})
	defer c.Close()
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Legacy timestamps are judged by the server's clock, not this
	// machine's: a local clock ahead of the old clients' would make their
	// live locks look expired, and --fail-on-old-client pass them.
	rc := goredis.New(c)
	var l inspect.Listing
	now, err := rc.Time(ictx)
	if err != nil {
		err = fmt.Errorf("inspect: TIME on %s: %w", rc, err)
	} else {
		q.Now = now
		if l, err = inspect.Scan(ictx, rc, q); err == nil {
			return l, inspect.Print(stdout, l, now)
		}
	}
	// What was listed before the failure is still worth showing, marked as
	// incomplete by the error after it.
	if len(l.Entries) > 0 {
		if perr := inspect.Print(stdout, l, now); perr != nil {
			return l, perr
		}
	}
	switch {
	case ctx.Err() != nil && len(l.Entries) == 0:
		return l, exitCode{exitInterrupted, "inspect: interrupted before any key was listed"}
	case ctx.Err() != nil:
		return l, exitCode{exitInterrupted, fmt.Sprintf("inspect: interrupted; printed the %d keys listed so far", len(l.Entries))}
	case ictx.Err() != nil:
		return l, fmt.Errorf("%w (stopped by --timeout %v: raise it, or narrow --prefix)", err, timeout)
	}
	return l, authHint(err, t) // it names the command, the server and the cause once
}

// listProgress returns an inspect.Query.Progress for command that writes
// a line to w at most once per every, the first one every after it was
// made.
func listProgress(w io.Writer, command string, every time.Duration) func(listed, calls int) {
	last := time.Now() // a listing that takes less than every prints nothing
	return func(listed, calls int) {
		if now := time.Now(); now.Sub(last) >= every {
			last = now
			fmt.Fprintf(w, "%s: %d keys listed after %d SCAN calls ...\n", command, listed, calls)
		}
	}
}

func parseVersion(args []string, stdout, _ io.Writer) (job, error) {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = commandUsage(fs, "", "Prints the module version, VCS revision and Go version of this binary.")
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	return func(context.Context) error {
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return fmt.Errorf("version: this binary carries no build information (built without module support)")
		}
		_, err := io.WriteString(stdout, versionText(bi, runtime.GOOS, runtime.GOARCH))
		return err
	}, nil
}

// versionText describes a build: the module's version (as `go install
// module@version` records it, or a pseudo-version or "(devel)" for a
// local build), the VCS revision it was built from when recorded, and the
// Go toolchain and platform.
func versionText(bi *debug.BuildInfo, goos, goarch string) string {
	var b strings.Builder
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	fmt.Fprintf(&b, "lockswap %s\n", version)
	if bi.Main.Path != "" {
		fmt.Fprintf(&b, "module:   %s\n", bi.Main.Path)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision: %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "go:       %s %s/%s\n", bi.GoVersion, goos, goarch)
	return b.String()
}
