package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/compare"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	backends := fs.String("backends", "", "comma-separated backends, each in its default configuration (default all: "+strings.Join(compare.BackendNames(), ",")+")")
	duration := fs.Duration("duration", time.Second, "time per measurement")
	useMini := fs.Bool("miniredis", false, "use miniredis even when redis-server is on PATH")
	fs.Usage = commandUsage(fs, "[flags]", "Measures acquire+release cycles per backend (serial, parallel, contended) on the\nsame kind of servers compare starts.")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *duration <= 0 {
		return usageError("bench: --duration %v: want a positive duration such as 1s", *duration)
	}
	o := compare.BenchOptions{Backends: splitList(*backends), Duration: *duration, Miniredis: *useMini}
	if _, err := compare.ShorthandColumns(o.Backends); err != nil {
		return usageError("bench: %v", err)
	}
	if isTerminal(stderr) {
		o.Progress = stderr
	}
	rows, env, err := compare.Bench(ctx, o)
	if err != nil {
		return err
	}
	return compare.WriteBench(stdout, rows, env)
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("redis", "", "Redis address host:port (required)")
	prefix := fs.String("prefix", "", "key prefix to list, e.g. lock.")
	limit := fs.Int("limit", 1000, "list at most this many keys")
	password := fs.String("password", "", "Redis password; prefer the REDIS_PASSWORD environment variable (a flag shows in ps)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return exitCode{2, "inspect: --redis host:port is required"}
	}
	pw := *password
	if pw == "" {
		pw = os.Getenv("REDIS_PASSWORD")
	}
	c := redis.NewClient(&redis.Options{Addr: *addr, Password: pw, ContextTimeoutEnabled: true})
	defer c.Close()
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now()
	entries, err := inspect.Scan(ictx, goredis.New(c), *prefix, *limit, now)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", *addr, err)
	}
	return inspect.Print(stdout, entries, now)
}
