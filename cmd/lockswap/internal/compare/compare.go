package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/redlock"
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
	// Columns are the configurations to compare, as "backend" or
	// "backend?name=value&..." (see ParseColumn); empty means
	// DefaultColumns.
	Columns []string
	// Backends is a shorthand for Columns: each named backend in its
	// default configuration. Give Columns or Backends, not both.
	Backends []string
	// Scenarios to run; empty means all (ScenarioNames).
	Scenarios []string
	// Kind is what the scenarios take: KindMutex (the default, also
	// ""), KindPermit (a permit of a counting semaphore of limit 1, which
	// must keep what a mutex keeps) or KindWrite (the write hold of a
	// read-write lock). A column whose backend lacks the kind is not
	// applicable.
	Kind string
	// Iterations is the number of critical sections per goroutine in the
	// contention scenario (0 means 20).
	Iterations int
	// Budget is the longest one cell (one scenario against one column) may
	// take; a cell that runs out is inconclusive. 0 means DefaultBudget.
	Budget time.Duration
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
	// RedisUsername and RedisPassword log in to the RedisAddrs servers
	// (AUTH); never printed. RedisPasswordFrom says where the password
	// came from ("--password", ...), for the error when it is refused.
	RedisUsername, RedisPassword, RedisPasswordFrom string
	// Log, when set, receives the one kind of the backends' log records
	// that a person running compare must see: a wait nobody asked for,
	// redlock's restart-safety quarantine (redlock.MsgQuarantine), with
	// its reason and the time left. The scenarios lose locks and stop
	// servers on purpose, so the other records (lock lost, release gave
	// up, ...) would only be noise and are dropped. Each record carries
	// the column and the scenario it came from.
	Log slog.Handler
}

// DefaultIterations is the contention scenario's default number of
// critical sections per goroutine.
const DefaultIterations = 20

// DefaultBudget is the default time one cell may take: a minute for the
// scenarios' own waits, plus 10 ms for each critical section of the
// contention scenario (8 goroutines × iterations).
func DefaultBudget(iterations int) time.Duration {
	if iterations <= 0 {
		iterations = DefaultIterations
	}
	if iterations > 1e9 { // about 2.5 years; more would overflow
		iterations = 1e9
	}
	return time.Minute + time.Duration(iterations)*contenders*10*time.Millisecond
}

// env is what a run has: real redis-server processes, or only miniredis.
type env struct {
	real          bool
	redisAddrs    []string         // the user's servers, when given
	redisAuth     userservers.Auth // how to log in to them
	etcdEndpoints []string
	prefix        string       // key prefix on the user's servers
	log           slog.Handler // the library's records a person must see
	warn          slog.Handler // compare's own warnings (Options.Log, unfiltered)
	kind          string       // Options.Kind
}

// errUserServers: the cell is not run on servers the comparison did not
// start; the error wrapping it says why (see userservers.go).
var errUserServers = errors.New("not run on your servers")

// destructive reports whether a scenario harms the servers it runs on.
func destructive(sc string) bool {
	switch sc {
	case ScRestart, ScFailover, ScMinorityDown, ScMajorityDown, ScLeaderStop, ScHung:
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
	// serverWideKey is the key outside any prefix the configuration keeps
	// (see redisBackend.serverWideKey); such a column is not run on the
	// user's servers.
	serverWideKey string
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Check checks o as Run does before it starts anything (iterations,
// budget, columns or backends, scenarios): a mistake is an error matching
// ErrUsage, and nil means Run would start measuring.
func Check(o Options) error {
	_, _, err := prepare(o)
	return err
}

// prepare checks o and returns it with its defaults set, and its columns.
func prepare(o Options) (Options, []Column, error) {
	if o.Iterations < 0 {
		return o, nil, usageErr("iterations %d: want at least 1", o.Iterations)
	}
	if o.Iterations == 0 {
		o.Iterations = DefaultIterations
	}
	if o.Budget < 0 {
		return o, nil, usageErr("budget %v: want a positive duration", o.Budget)
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget(o.Iterations)
	}
	specs := o.Columns
	switch {
	case len(o.Columns) > 0 && len(o.Backends) > 0:
		return o, nil, usageErr("give columns or backends, not both")
	case len(o.Backends) > 0:
		var err error
		if specs, err = ShorthandColumns(o.Backends); err != nil {
			return o, nil, err
		}
	case len(specs) == 0:
		specs = DefaultColumns
	}
	columns, err := ParseColumns(specs)
	if err != nil {
		return o, nil, err
	}
	if !contains(Kinds(), o.Kind) && o.Kind != "" {
		return o, nil, usageErr("unknown kind %q (known: %s)", o.Kind, strings.Join(Kinds(), ", "))
	}
	for _, s := range o.Scenarios {
		if !contains(ScenarioNames(), s) {
			return o, nil, usageErr("unknown scenario %q (known: %s)", s, strings.Join(ScenarioNames(), ", "))
		}
	}
	return o, columns, nil
}

// Run runs the comparison. Mistakes in o are errors matching ErrUsage.
// When ctx is cancelled, Run returns what it measured so far (the cells it
// did not finish are inconclusive, Result.Interrupted is set) with ctx's
// error.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, columns, err := prepare(o)
	if err != nil {
		return nil, err
	}
	e := &env{redisAddrs: o.RedisAddrs, redisAuth: userservers.Auth{User: o.RedisUsername, Password: o.RedisPassword, From: o.RedisPasswordFrom}, etcdEndpoints: o.EtcdEndpoints, prefix: "lockswap-compare-" + lockstate.NewToken()[:8] + ":", kind: o.Kind}
	_, hasRedis := servers.RedisServerPath()
	e.real = hasRedis && !o.Miniredis
	if o.Log != nil {
		e.log = onlyMessages(o.Log, redlock.MsgQuarantine)
		e.warn = o.Log
	}
	if err := checkUserServers(ctx, e); err != nil {
		return nil, err
	}
	redisEnv := "real redis-server processes started on loopback"
	switch {
	case len(o.RedisAddrs) > 0:
		redisEnv = fmt.Sprintf("your servers %v (scenarios that harm servers not run; keys under %s*)", o.RedisAddrs, e.prefix)
	case !e.real:
		redisEnv = "miniredis (in-process fake; redis-server not found on PATH or --miniredis given): keys expire on the wall clock as on a real server; " +
			"restart and failover need real processes and are marked \"not run\"; hung-server measures only a proxy that never answers (SIGSTOP needs a real process)"
	}
	etcdEnv := "embedded (in process)"
	if len(o.EtcdEndpoints) > 0 {
		etcdEnv = fmt.Sprintf("your endpoints %v (scenarios that harm servers not run; keys under %s*)", o.EtcdEndpoints, e.prefix)
	}
	for i := range columns {
		columns[i].Servers = userServers(columns[i], o)
	}
	res := &Result{Environment: "redis: " + redisEnv + "; etcd: " + etcdEnv, Columns: columns}
	if o.Kind != "" && o.Kind != KindMutex {
		res.Environment += "; locks taken: " + kindText(o.Kind)
	}
	var selected []scenario
	for _, sc := range scenarios {
		if len(o.Scenarios) == 0 || contains(o.Scenarios, sc.name) {
			selected = append(selected, sc)
		}
	}
	total, done := len(selected)*len(columns), 0
	for _, sc := range selected {
		if ctx.Err() != nil {
			break
		}
		row := Row{Scenario: sc.name, Description: sc.description, Cells: map[string]Cell{}}
		for _, col := range columns {
			if ctx.Err() != nil {
				row.Cells[col.Label] = Cell{Outcome: NotRun, Verdict: Inconclusive, Detail: "interrupted before it ran"}
				continue
			}
			done++
			progress(o.Progress, "[%d/%d] %s: %s ...", done, total, sc.name, col.Label)
			start := time.Now()
			cell := runCell(ctx, e, col.kit, sc, o.Iterations, o.Budget)
			progress(o.Progress, "[%d/%d] %s: %s: %s (%v)", done, total, sc.name, col.Label, cell.short(), time.Since(start).Round(time.Millisecond))
			row.Cells[col.Label] = cell
		}
		res.Rows = append(res.Rows, row)
	}
	if err := ctx.Err(); err != nil {
		res.Interrupted = true
		return res, err
	}
	return res, nil
}

// runCell runs one scenario against one column within budget, and gives
// the cell its verdict.
func runCell(ctx context.Context, e *env, k kit, sc scenario, iterations int, budget time.Duration) Cell {
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	cell, byDesign := runOne(cctx, e, k, sc, iterations)
	cell.Expected, cell.Declared = sc.declared(k.guarantees)
	switch {
	case byDesign:
		cell.Verdict = NotRunByDesign
		if cell.Expected == NotApplicable {
			cell.Expected = ""
		}
	case ctx.Err() != nil:
		cell = Cell{Outcome: NotRun, Verdict: Inconclusive, Expected: cell.Expected, Declared: cell.Declared,
			Detail: "interrupted while it ran"}
	case cctx.Err() != nil:
		cell.Verdict = Inconclusive
		cell.Detail = join(fmt.Sprintf("time budget of %v used up (raise --budget)", budget), cell.Detail)
	case cell.Outcome == NotRun:
		cell.Verdict = Inconclusive
	case contradicts(cell, cell.Expected, k.guarantees, sc.name):
		cell.Verdict = Contradiction
	default:
		cell.Verdict = AsDeclared
	}
	return cell
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// runOne runs one scenario against one backend configuration; byDesign
// says that the cell is not run by design (not applicable, would harm the
// user's servers, cannot be measured faithfully here).
func runOne(ctx context.Context, e *env, k kit, sc scenario, iterations int) (cell Cell, byDesign bool) {
	if expected, why := sc.declared(k.guarantees); expected == NotApplicable {
		if why == "" {
			why = "the fault does not exist for this backend"
		}
		return Cell{Outcome: NotApplicable, Detail: why}, true
	}
	if why := lacksKind(e.kind, k.guarantees); why != "" {
		return Cell{Outcome: NotApplicable, Detail: why}, true
	}
	f, err := k.setup(ctx, e, sc.name)
	switch {
	case errors.Is(err, errNotApplicable):
		return Cell{Outcome: NotApplicable, Detail: strings.TrimPrefix(err.Error(), errNotApplicable.Error()+": ")}, true
	case errors.Is(err, errNeedsReal):
		return Cell{Outcome: NotRun, Detail: "cannot be measured faithfully without real redis-server processes (in-process miniredis cannot be restarted or replicated)"}, true
	case errors.Is(err, errUserServers):
		return Cell{Outcome: NotRun, Detail: err.Error()}, true
	case err != nil:
		return Cell{Outcome: NotRun, Detail: "setup failed: " + err.Error()}, false
	}
	defer f.close()
	f.opt = kindOption(e.kind)
	if e.log != nil {
		f.logger = slog.New(e.log.WithAttrs([]slog.Attr{slog.String("column", k.name), slog.String("scenario", sc.name)}))
	}
	return sc.run(ctx, f, k.guarantees, iterations), false
}

// contradicts says whether a measured cell contradicts the declaration.
func contradicts(c Cell, expected Outcome, g lockswap.Guarantees, sc string) bool {
	switch c.Outcome {
	case NotRun, NotApplicable, "":
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
