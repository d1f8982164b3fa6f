package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// commands returns how many commands the server behind c has run, from
// INFO commandstats, leaving out INFO itself (the counting requests).
func commands(ctx context.Context, tb testing.TB, c *goredis.Client) int64 {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			tb.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// serverCPU returns the CPU time (user + system, its children's left
// out) the server behind c has used, from INFO cpu.
func serverCPU(ctx context.Context, tb testing.TB, c *goredis.Client) time.Duration {
	s, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sec float64
	for _, line := range strings.Split(s, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_sys" && name != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			tb.Fatalf("INFO cpu line %q: %v", line, err)
		}
		sec += f
	}
	return time.Duration(sec * float64(time.Second))
}

// serverCPUOn sums serverCPU over the servers of cs.
func serverCPUOn(tb testing.TB, cs []*goredis.Client) time.Duration {
	var d time.Duration
	for _, c := range cs {
		d += serverCPU(context.Background(), tb, c)
	}
	return d
}

// commandsOn sums commands over the servers of cs.
func commandsOn(tb testing.TB, cs []*goredis.Client) int64 {
	var n int64
	for _, c := range cs {
		n += commands(context.Background(), tb, c)
	}
	return n
}
