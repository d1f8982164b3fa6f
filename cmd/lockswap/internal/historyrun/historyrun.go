// Package historyrun is `lockswap history` (issue 32): each backend
// configuration on servers it starts, several clients per key running
// the recorded-increment workload of package history while a seeded
// nemesis (internal/nemesis) pauses, restarts, slows or cuts off the
// servers and pauses holders past their locks; then Porcupine checks the
// recorded history, and the verdict is set against what the
// configuration's Guarantees declare.
//
// Verdicts: a configuration whose register checks fences (the backend
// declares Fencing) must give a linearizable history with fences rising;
// any violation contradicts the declaration. Without fences, a lost
// update is the declared weakness of a lease (Guarantees:
// SurvivesHolderPause, SurvivesRestart false) when the schedule drew what
// causes it (a holder that outlived its lock, a restart without data), and
// a contradiction when it did not. A history the checker could not decide
// within its budget is inconclusive, never a pass. On a violation the
// history (JSON lines) and Porcupine's view of each failing key (HTML) are
// written under Options.Out, with the seed to replay the schedule.
package historyrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesis"
)

// Defaults of Options.
const (
	DefaultDuration = 30 * time.Second
	DefaultClients  = 4
	// TTL is the locks' TTL: short, so that holder pauses and faults
	// outlive locks often within a run.
	TTL = time.Second
	// CheckBudget is how long Porcupine may take per run before a key is
	// left undecided (inconclusive).
	CheckBudget = time.Minute
)

// Options configure a run.
type Options struct {
	// Configs are the configurations to run (Configs()), in order.
	Configs []Config
	// Duration is how long each configuration runs its workload.
	Duration time.Duration
	// Clients is how many clients (Lockers, each with its own
	// connections) take the same two keys.
	Clients int
	// Seed makes the schedules (each configuration's is Seed plus its
	// index); 0 takes a new one, printed in the report.
	Seed uint64
	// Out is the folder failing histories go to; "" is the system's
	// temporary folder.
	Out string
	// On is the flags that name the user's servers (" --redis host:port"),
	// without a password, for the command that replays a schedule; "" on
	// servers the run starts.
	On string
	// Login, when the user's servers want one, says how to give it again
	// for a replay (never the password itself).
	Login string
	// Progress, when set, receives a line per configuration and the
	// nemesis's log.
	Progress io.Writer
}

// Verdict is a configuration's outcome.
type Verdict string

// The verdicts.
const (
	// Holds: linearizable (and, with fences, fences rising).
	Holds Verdict = "holds"
	// WeaknessShown: a lost update, and the schedule drew a fault the
	// Guarantees declare it does not survive.
	WeaknessShown Verdict = "declared weakness shown"
	// Contradicted: a violation the Guarantees do not declare.
	Contradicted Verdict = "CONTRADICTS the declaration"
	// Inconclusive: the checker could not decide within its budget.
	Inconclusive Verdict = "inconclusive"
)

// Result is one configuration's run.
type Result struct {
	Config   string
	Seed     uint64
	Sections int
	Late     int // sections that outlived their lock
	Rejected int // sections whose write the fenced register refused
	Faults   []nemesis.Event
	Check    history.Result
	Verdict  Verdict
	// Why explains the verdict in one sentence.
	Why string
	// CheckTime is how long Porcupine took.
	CheckTime time.Duration
	// Files are what was written for a violation or an undecided key.
	Files []string
	// KeysLeft, on the user's servers, says which of the run's keys could
	// not be deleted, and why ("" when all were).
	KeysLeft string

	on, login string // Options.On, Options.Login
}

// Run runs each configuration of o in turn and returns their results;
// an error means a run could not be made (servers, Lockers), not a
// verdict.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Clients <= 0 {
		o.Clients = DefaultClients
	}
	if o.Seed == 0 {
		o.Seed = nemesis.NewSeed()
	}
	var out []Result
	for i, c := range o.Configs {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r, err := runOne(ctx, o, c, o.Seed+uint64(i))
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// runOne runs configuration c with the schedule of seed.
func runOne(ctx context.Context, o Options, c Config, seed uint64) (r Result, err error) {
	logf := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, c.Name+": "+format+"\n", args...)
		}
	}
	logf("starting servers")
	env, err := c.start()
	if err != nil {
		return Result{}, err
	}
	// Deferred before the Lockers' Close, so it runs after them: the
	// proxies stop (no byte they held reaches a server after), then the
	// run's keys on the user's servers are deleted. A key left is in the
	// result (and joins an error), never dropped.
	defer func() {
		env.stop()
		if env.keysLeft == nil {
			return
		}
		if kerr := env.keysLeft(); kerr != nil {
			r.KeysLeft = kerr.Error()
			if err != nil {
				err = errors.Join(err, fmt.Errorf("the run's keys are left on your servers: %w", kerr))
			}
		}
	}()
	lks := make([]lockswap.Locker, o.Clients)
	for i := range lks {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		lks[i], err = env.openClient(octx, i)
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("open client %d: %w", i, err)
		}
		defer lks[i].Close()
	}
	g := lks[0].Guarantees()
	fenced := g.Fencing
	w := history.Workload{
		Lockers: lks, Keys: []string{"a", "b"}, Sections: 1 << 30, TTL: TTL,
		Register: history.NewRegister(fenced), Recorder: history.NewRecorder(),
		Between: nemesis.PauseHolder(nemesis.Rand(seed), 10, TTL/2),
	}
	s := nemesis.Schedule{Faults: env.faults, MaxHold: TTL / 2, MaxGap: 300 * time.Millisecond, Seed: seed}
	rctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	logf("running %v with %d clients on keys a and b (seed %d)", o.Duration, o.Clients, seed)
	ops, events, err := nemesis.RunWorkload(rctx, s, w, logf)
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if err != nil {
		return Result{}, err
	}
	logf("checking %d sections", len(ops))
	checkStart := time.Now()
	res, err := history.Check(ops, CheckBudget)
	if err != nil {
		return Result{}, err
	}
	r = Result{Config: c.Name, Seed: seed, Sections: len(ops), Faults: events, Check: res, CheckTime: time.Since(checkStart), on: o.On, login: o.Login}
	for _, op := range ops {
		if op.Late {
			r.Late++
		}
		if !op.Wrote {
			r.Rejected++
		}
	}
	excuses := events
	if !env.jumpsMatter {
		excuses = without(events, "jump ")
	}
	r.Verdict, r.Why = judge(g, fenced, res, r.Late > 0, excuses)
	if r.Verdict != Holds || len(res.Fences) > 0 {
		dir := o.Out
		if dir == "" {
			dir = filepath.Join(osTempDir(), "lockswap-history")
		}
		dir = filepath.Join(dir, fmt.Sprintf("%s-%d", strings.NewReplacer("+", "_", "/", "_").Replace(c.Name), seed))
		if r.Files, err = nemesis.Save(dir, ops, res); err != nil {
			return r, fmt.Errorf("writing the history: %w", err)
		}
	}
	return r, nil
}

// without returns events without those whose fault starts with prefix.
func without(events []nemesis.Event, prefix string) []nemesis.Event {
	var out []nemesis.Event
	for _, e := range events {
		if !strings.HasPrefix(e.Fault, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// drew reports whether events has a fault whose name starts with prefix
// ("restart ", "jump ").
func drew(events []nemesis.Event, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e.Fault, prefix) {
			return true
		}
	}
	return false
}

// judge sets a checked history against the Guarantees g: with a fenced
// register every violation contradicts Fencing; without, a lost update is
// declared when a holder outlived its lock (late) and the backend does not
// survive a holder pause, when a restart without data or a failover ran
// and it does not survive one, or when a client's clock jumped and it
// needs synchronized clocks.
func judge(g lockswap.Guarantees, fenced bool, res history.Result, late bool, events []nemesis.Event) (Verdict, string) {
	switch {
	case fenced && (len(res.Violations) > 0 || len(res.Fences) > 0):
		return Contradicted, fmt.Sprintf("Fencing is declared, but the fenced register's history has violations on %q and fence errors %q", res.Violations, res.Fences)
	case len(res.Violations) > 0:
		var why []string
		if late && !g.SurvivesHolderPause {
			why = append(why, "a holder outlived its lock (SurvivesHolderPause is false)")
		}
		if drew(events, "restart ") && !g.SurvivesRestart {
			why = append(why, "a server restarted without its data (SurvivesRestart is false)")
		}
		if drew(events, "fail ") && !g.SurvivesFailover {
			why = append(why, "a server failed over to a replica without its recent writes (SurvivesFailover is false)")
		}
		if drew(events, "jump ") && g.Clock == lockswap.ClockSynchronized {
			why = append(why, "a client's clock jumped (Clock is ClockSynchronized)")
		}
		if len(why) == 0 {
			return Contradicted, fmt.Sprintf("lost updates on %q, and the schedule drew nothing the Guarantees say breaks exclusion", res.Violations)
		}
		return WeaknessShown, fmt.Sprintf("lost updates on %q: %s", res.Violations, strings.Join(why, "; "))
	case len(res.Unknown) > 0:
		return Inconclusive, fmt.Sprintf("the checker did not decide keys %q within %v", res.Unknown, CheckBudget)
	case fenced:
		return Holds, "linearizable, fences rising and never repeated"
	}
	return Holds, "linearizable (no lost update in this schedule)"
}
