package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/servers"
)

func init() {
	// go-redis logs failed dials on its own; the scenarios kill servers on
	// purpose and report what the backends returned.
	goredis.SetLogger(nopLogger{})
}

type nopLogger struct{}

func (nopLogger) Printf(context.Context, string, ...any) {}

// Options configure a comparison.
type Options struct {
	// Backends to compare; empty means all (BackendNames).
	Backends []string
	// Scenarios to run; empty means all (ScenarioNames).
	Scenarios []string
	// Iterations is the number of critical sections per goroutine in the
	// contention scenario (default 20).
	Iterations int
	// Miniredis forces miniredis even when redis-server is on PATH.
	Miniredis bool
	// Progress, when set, receives one line per step.
	Progress io.Writer
	// RedisAddrs and EtcdEndpoints point the comparison at your own servers
	// instead of servers it starts: one address for singleredis and
	// legacysetnx (the first), an odd number of at least three independent
	// masters for redlock, and etcd endpoints (host:port). Run fails at
	// once with an ErrUnavailable error when one of them does not answer.
	// Scenarios that kill, restart or fail over servers are not run against
	// them, nor a column that keeps a server-wide key your own clients read
	// (restart-safe Redlock's epoch); keys go under a random
	// "lockswap-compare-" prefix and are deleted after each scenario.
	RedisAddrs    []string
	EtcdEndpoints []string
}

// env is what a run has: real redis-server processes, or only miniredis.
type env struct {
	real          bool
	redisAddrs    []string // the user's servers, when given
	etcdEndpoints []string
	prefix        string // key prefix on the user's servers
}

// errUserServers: the cell is not run on servers the comparison did not
// start; the error wrapping it says why (see userservers.go).
var errUserServers = errors.New("not run on your servers")

// destructive reports whether a scenario harms the servers it runs on.
func destructive(sc string) bool {
	switch sc {
	case ScRestart, ScFailover, ScMinorityDown, ScMajorityDown, ScLeaderStop:
		return true
	}
	return false
}

// kit knows how to set one backend up for each scenario.
type kit struct {
	name       string
	guarantees lockswap.Guarantees
	// setup starts fresh servers for the scenario and returns a fixture; it
	// returns errNotApplicable or errNeedsReal when it cannot.
	setup func(ctx context.Context, e *env, scenario string) (*fixture, error)
}

// BackendNames lists the backends in column order.
func BackendNames() []string {
	out := make([]string, len(kits))
	for i, k := range kits {
		out[i] = k.name
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Run runs the comparison.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Iterations <= 0 {
		o.Iterations = 20
	}
	for _, b := range o.Backends {
		if !contains(BackendNames(), b) {
			return nil, fmt.Errorf("compare: unknown backend %q (known: %v): %w", b, BackendNames(), lockswap.ErrInvalid)
		}
	}
	for _, s := range o.Scenarios {
		if !contains(ScenarioNames(), s) {
			return nil, fmt.Errorf("compare: unknown scenario %q (known: %v): %w", s, ScenarioNames(), lockswap.ErrInvalid)
		}
	}
	e := &env{redisAddrs: o.RedisAddrs, etcdEndpoints: o.EtcdEndpoints, prefix: "lockswap-compare-" + lockstate.NewToken()[:8] + ":"}
	_, hasRedis := servers.RedisServerPath()
	e.real = hasRedis && !o.Miniredis
	if err := checkUserServers(ctx, e); err != nil {
		return nil, err
	}
	redisEnv := "real redis-server processes started on loopback"
	switch {
	case len(o.RedisAddrs) > 0:
		redisEnv = fmt.Sprintf("your servers %v (scenarios that harm servers not run; keys under %s*)", o.RedisAddrs, e.prefix)
	case !e.real:
		redisEnv = "miniredis (in-process fake; redis-server not found on PATH or --miniredis given): keys expire on the wall clock as on a real server; " +
			"restart and failover need real processes and are marked \"not run\""
	}
	etcdEnv := "embedded (in process)"
	if len(o.EtcdEndpoints) > 0 {
		etcdEnv = fmt.Sprintf("your endpoints %v (scenarios that harm servers not run; keys under %s*)", o.EtcdEndpoints, e.prefix)
	}
	res := &Result{Environment: "redis: " + redisEnv + "; etcd: " + etcdEnv}
	var selected []kit
	for _, k := range kits {
		if len(o.Backends) == 0 || contains(o.Backends, k.name) {
			selected = append(selected, k)
			res.Backends = append(res.Backends, k.name)
		}
	}
	total, done := 0, 0
	for _, sc := range scenarios {
		if len(o.Scenarios) == 0 || contains(o.Scenarios, sc.name) {
			total += len(selected)
		}
	}
	for _, sc := range scenarios {
		if len(o.Scenarios) > 0 && !contains(o.Scenarios, sc.name) {
			continue
		}
		row := Row{Scenario: sc.name, Description: sc.description, Cells: map[string]Cell{}}
		for _, k := range selected {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			done++
			progress(o.Progress, "[%d/%d] %s: %s ...", done, total, sc.name, k.name)
			start := time.Now()
			cell := runOne(ctx, e, k, sc, o.Iterations)
			progress(o.Progress, "[%d/%d] %s: %s: %s (%v)", done, total, sc.name, k.name, cell.Outcome, time.Since(start).Round(time.Millisecond))
			row.Cells[k.name] = cell
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func runOne(ctx context.Context, e *env, k kit, sc scenario, iterations int) (cell Cell) {
	expected, declared := sc.declared(k.guarantees)
	defer func() {
		cell.Expected, cell.Declared = expected, declared
		if expected == NotApplicable {
			cell.Expected = ""
		}
		cell.Contradiction = contradicts(cell, expected, k.guarantees, sc.name)
	}()
	if expected == NotApplicable {
		return Cell{Outcome: NotApplicable}
	}
	f, err := k.setup(ctx, e, sc.name)
	switch {
	case errors.Is(err, errNotApplicable):
		return Cell{Outcome: NotApplicable, Detail: err.Error()}
	case errors.Is(err, errNeedsReal):
		return Cell{Outcome: NotRun, Detail: err.Error()}
	case errors.Is(err, errUserServers):
		return Cell{Outcome: NotRun, Detail: err.Error()}
	case err != nil:
		return Cell{Outcome: NotRun, Detail: "setup: " + err.Error()}
	}
	defer f.close()
	return sc.run(ctx, f, k.guarantees, iterations)
}

// contradicts says whether a measured cell contradicts the declaration.
func contradicts(c Cell, expected Outcome, g lockswap.Guarantees, sc string) bool {
	switch c.Outcome {
	case NotRun, NotApplicable:
		return false
	}
	if expected == NotApplicable || expected == "" {
		return false
	}
	if c.Outcome != expected {
		return true
	}
	if sc == ScPause {
		// Fencing declared: the stale write must be rejected; not declared:
		// nothing could have rejected it.
		if g.Fencing && c.StaleRejected == 0 {
			return true
		}
		if !g.Fencing && c.StaleRejected > 0 {
			return true
		}
	}
	if sc == ScRestart || sc == ScFailover {
		// The lock is lost, but declared fences still increase (on the one
		// host's clock these servers share): a stale write that got through
		// means a fence repeated or went back.
		if g.Fencing && c.StaleAccepted > 0 {
			return true
		}
		if !g.Fencing && c.StaleRejected > 0 {
			return true
		}
	}
	return false
}
