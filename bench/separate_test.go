package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/benchloop"
	lsgoredis "github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

// separate is the contended shape where every goroutine has its own Locker
// and its own client: what 8 processes on one key see, in one process.
var separate = benchloop.Shape{Name: "separate", Goroutines: 8, OneKey: true}

// every is a retry policy that waits d before every attempt.
type every time.Duration

func (e every) NextDelay(int) (time.Duration, bool) { return time.Duration(e), true }

func newGoredis(tb testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	tb.Cleanup(func() { c.Close() })
	return c
}

// separateImpls make, for each goroutine (or process), a Locker with its
// own client to addr.
func separateImpls(addr string) []impl {
	return []impl{
		{"floor-poll1ms", func(b *testing.B) cycleFunc { return newSeparate(b, "floor-poll1ms", addr) }},
		{"lockswap-goredis", func(b *testing.B) cycleFunc { return newSeparate(b, "lockswap-goredis", addr) }},
		{"lockswap-rueidis", func(b *testing.B) cycleFunc { return newSeparate(b, "lockswap-rueidis", addr) }},
		{"lockswap-goredis-fair", func(b *testing.B) cycleFunc { return newSeparate(b, "lockswap-goredis-fair", addr) }},
		{"lockswap-rueidis-fair", func(b *testing.B) cycleFunc { return newSeparate(b, "lockswap-rueidis-fair", addr) }},
		{"rueidislock", func(b *testing.B) cycleFunc { return newSeparate(b, "rueidislock", addr) }},
	}
}

var separateNames = []string{"floor-poll1ms", "lockswap-goredis", "lockswap-rueidis", "lockswap-goredis-fair", "lockswap-rueidis-fair", "rueidislock"}

func newSeparate(tb testing.TB, name, addr string) cycleFunc {
	switch name {
	case "floor-poll1ms":
		return goredisFloorCycle(newGoredis(tb, addr), every(time.Millisecond))
	case "lockswap-goredis", "lockswap-goredis-fair":
		// -fair: Options.FairWait, the queue in Redis (issue 15's (iii));
		// without it singleredis polls, as it does by default.
		lk, err := singleredis.New(lsgoredis.New(newGoredis(tb, addr)), singleredis.Options{FairWait: strings.HasSuffix(name, "-fair")})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { lk.Close() })
		return lockswapCycle(lk)
	case "lockswap-rueidis", "lockswap-rueidis-fair":
		_, c := newRueidis(tb, addr)
		lk, err := singleredis.New(c, singleredis.Options{FairWait: strings.HasSuffix(name, "-fair")})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { lk.Close() })
		return lockswapCycle(lk)
	case "rueidislock":
		return rueidisLockCycle(newRueidisLock(tb, addr))
	}
	tb.Fatalf("no separate impl %q", name)
	return nil
}

// Environment of the cross-process run.
const (
	// ProcsEnv set to a duration (e.g. "1s") makes TestProcesses run: for
	// each separate impl, 8 child processes (this test binary re-executed)
	// contend for one key for that long.
	ProcsEnv = "LOCKSWAP_BENCH_PROCS"
	// childEnv is "impl,addr,key,start-unix-ns,duration" in a child.
	childEnv = "LOCKSWAP_BENCH_CHILD"
)

const nprocs = 8

// TestProcesses is the contended scenario across 8 OS processes, each with
// its own Locker and client: it prints one BenchmarkLocks/processes/redis1/
// <impl> line per impl, in the format of the benchmark lines (acq/s,
// fairness, cmds/op), which bench/report reads. Each child is bounded by
// the duration plus 20 s.
func TestProcesses(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(ProcsEnv))
	if err != nil || os.Getenv(RedisEnv) == "" {
		t.Skipf("%s (a duration) and %s are not set: run bench/run.sh", ProcsEnv, RedisEnv)
	}
	addr := strings.Split(os.Getenv(RedisEnv), ",")[0]
	gr := newGoredis(t, addr)
	for _, name := range separateNames {
		key := fmt.Sprintf("bench:procs:%s:%d", name, time.Now().UnixNano())
		start := time.Now().Add(2 * time.Second) // time for the children to start and connect
		ctx, cancel := context.WithTimeout(context.Background(), d+20*time.Second)
		before := commands(ctx, t, gr)
		cmds := make([]*exec.Cmd, nprocs)
		outs := make([]*strings.Builder, nprocs)
		for i := range cmds {
			c := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestProcessChild$", "-test.count=1")
			c.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%s,%d,%s", childEnv, name, addr, key, start.UnixNano(), d))
			outs[i] = &strings.Builder{}
			c.Stdout, c.Stderr = outs[i], outs[i]
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = c
		}
		counts := make([]int, nprocs)
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("%s child %d: %v\n%s", name, i, err, outs[i])
			}
			sc := bufio.NewScanner(strings.NewReader(outs[i].String()))
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "acquisitions "); ok {
					counts[i], _ = strconv.Atoi(v)
				}
			}
		}
		after := commands(ctx, t, gr)
		cancel()
		total := 0
		for _, n := range counts {
			total += n
		}
		if total == 0 {
			t.Fatalf("%s: no acquisitions", name)
		}
		perSec := float64(total) / d.Seconds()
		fair := float64(slices.Min(counts)) / float64(slices.Max(counts))
		fmt.Printf("BenchmarkLocks/processes/redis1/%s \t %d \t %.0f ns/op \t %.1f acq/s \t %.3f fairness \t %.2f cmds/op \t %.1f cmds/goroutine-s\n",
			name, total, 1e9/perSec, perSec, fair, float64(after-before)/float64(total), float64(after-before)/d.Seconds()/nprocs)
	}
}

// TestProcessChild is one process of TestProcesses (it runs only with
// childEnv set): it waits for the common start, runs cycles on the key
// until the end, and prints its count.
func TestProcessChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("run by TestProcesses")
	}
	f := strings.Split(env, ",")
	if len(f) != 5 {
		t.Fatalf("%s=%q", childEnv, env)
	}
	startNs, _ := strconv.ParseInt(f[3], 10, 64)
	d, _ := time.ParseDuration(f[4])
	cycle := newSeparate(t, f[0], f[1])
	start := time.Unix(0, startNs)
	time.Sleep(time.Until(start))
	end := start.Add(d)
	// A waiter still waiting at the end is cut off by its context; that
	// cycle is not counted.
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(time.Second))
	defer cancel()
	n := 0
	for time.Now().Before(end) {
		if err := cycle(ctx, f[2], nil); err != nil {
			if time.Now().After(end) {
				break
			}
			t.Fatal(err)
		}
		n++
	}
	fmt.Printf("acquisitions %d\n", n)
}
