package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/redlock"
)

// errNotApplicable and errNeedsReal are returned by a kit's setup when a
// scenario does not apply to the backend, or needs real server processes.
var (
	errNotApplicable = errors.New("not applicable")
	errNeedsReal     = errors.New("needs real redis-server processes: miniredis runs in this process and cannot be restarted empty or replicated")
)

// fixture is one backend set up on fresh servers for one scenario.
type fixture struct {
	// newLocker returns an independent Locker (its own connections).
	newLocker func() (lockswap.Locker, error)
	// newSkewed returns a Locker whose wall clock runs skew ahead; nil when
	// the backend's safety does not read the client's wall clock.
	newSkewed func(skew time.Duration) (lockswap.Locker, error)
	// ttl is the lock TTL the scenario uses.
	ttl time.Duration
	// fault injects the scenario's fault.
	fault func(ctx context.Context) error
	// after returns a Locker for use after the fault (a failover moves
	// clients to the promoted replica); nil means newLocker.
	after func() (lockswap.Locker, error)
	// heal undoes a pause (pause scenario), before the woken holder acts.
	heal func()
	// note is added to the cell's detail.
	note string
	// hangs are the ways the servers can be made to hang (hung-server),
	// and alive checks that every server answers (after a hang).
	hangs []hang
	alive func(ctx context.Context) error
	// logger, when set, is given to the Lockers the fixture makes.
	logger *slog.Logger
	// auth logs the fixture's Redis clients in to the user's servers.
	auth userservers.Auth
	// origin maps an address by which only some clients reach a master
	// to the master's (see sameMaster).
	origin map[string]string

	// opt, when set, is added to every Acquire and TryAcquire of the
	// Lockers the fixture makes (Options.Kind).
	opt *lockswap.Option

	mu      sync.Mutex
	closers []func()
}

func (f *fixture) onClose(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closers = append(f.closers, fn)
}

func (f *fixture) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.closers) - 1; i >= 0; i-- {
		f.closers[i]()
	}
	f.closers = nil
}

// locker makes a Locker that is closed with the fixture.
func (f *fixture) locker(make func() (lockswap.Locker, error)) (lockswap.Locker, error) {
	lk, err := make()
	if err != nil {
		return nil, err
	}
	f.onClose(func() { lk.Close() })
	if f.opt != nil {
		return kindLocker{lk, *f.opt}, nil
	}
	return lk, nil
}

// scenario is one row of the comparison.
type scenario struct {
	name, description string
	// declared returns the expected outcome from the backend's guarantees
	// and the name of the property it comes from; NotApplicable when the
	// fault does not exist for the backend.
	declared func(g lockswap.Guarantees) (Outcome, string)
	run      func(ctx context.Context, f *fixture, g lockswap.Guarantees, iterations int) Cell
}

// Scenario names, as accepted by Options.Scenarios.
const (
	ScContention   = "contention"
	ScPause        = "holder-pause"
	ScClockAhead   = "clock-ahead"
	ScRestart      = "restart-no-persistence"
	ScFailover     = "failover-to-replica"
	ScMinorityDown = "minority-down"
	ScMajorityDown = "majority-down"
	ScSlow         = "slow-instance"
	ScLeaderStop   = "etcd-leader-stopped"
	ScHung         = "hung-server"
)

func heldIf(b bool) Outcome {
	if b {
		return Held
	}
	return Violated
}

var scenarios = []scenario{
	{ScContention, "goroutines of two Lockers contend for one key; an overlap detector counts holders inside at once",
		func(lockswap.Guarantees) (Outcome, string) { return Held, "mutual exclusion" },
		runContention},
	{ScPause, "a holder stops past its validity, a second client acquires, then the first writes to a fenced resource",
		func(g lockswap.Guarantees) (Outcome, string) {
			return heldIf(g.SurvivesHolderPause), fmt.Sprintf("pause-safe=%v fencing=%v", g.SurvivesHolderPause, g.Fencing)
		},
		runPause},
	{ScClockAhead, "a second client's wall clock runs an hour ahead while the first holds the lock",
		func(g lockswap.Guarantees) (Outcome, string) {
			return heldIf(g.Clock != lockswap.ClockSynchronized), "clock=" + g.Clock.String()
		},
		runClockAhead},
	{ScRestart, "Redis restarts without persistence (a majority of Redlock's masters) while the lock is held",
		func(g lockswap.Guarantees) (Outcome, string) {
			return heldIf(g.SurvivesRestart), fmt.Sprintf("survives-restart=%v", g.SurvivesRestart)
		},
		runTakeoverAfterFault},
	{ScFailover, "the primary holding the lock dies; its replica, which never received the lock, is promoted (Redlock: one of the masters that granted it, to a holder that got the fewest grants it accepts)",
		func(g lockswap.Guarantees) (Outcome, string) {
			return heldIf(g.SurvivesFailover), fmt.Sprintf("survives-failover=%v", g.SurvivesFailover)
		},
		runTakeoverAfterFault},
	{ScMinorityDown, "a minority of the servers is down; acquire and release must still work",
		func(g lockswap.Guarantees) (Outcome, string) {
			if g.Nodes < 3 {
				return NotApplicable, ""
			}
			// The scenario stops (N−1)/2 servers: the configuration must
			// tolerate that many (Redlock with Failovers f tolerates f
			// fewer: its acquire needs N/2+1+f).
			down := (g.Nodes - 1) / 2
			if g.Tolerates >= down {
				return Available, fmt.Sprintf("tolerates %d of %d", g.Tolerates, g.Nodes)
			}
			return Unavailable, fmt.Sprintf("tolerates %d of %d, fewer than the %d down", g.Tolerates, g.Nodes, down)
		},
		runAvailability},
	{ScMajorityDown, "a majority of the servers (or the only one) is down; acquire must fail with the outage error, not contention",
		func(g lockswap.Guarantees) (Outcome, string) { return Unavailable, "outage is not contention" },
		runAvailability},
	{ScSlow, "one server is 30 ms away each way; the lock's deadline must not promise more than the server grants",
		func(lockswap.Guarantees) (Outcome, string) { return Held, "deadline counted from before the request" },
		runSlow},
	{ScLeaderStop, "the etcd leader is stopped while the lock is held (three-member cluster)",
		func(g lockswap.Guarantees) (Outcome, string) {
			return heldIf(g.SurvivesFailover), fmt.Sprintf("survives-failover=%v", g.SurvivesFailover)
		},
		runTakeoverAfterFault},
	{ScHung, "every server accepts and never answers (a proxy that forwards nothing), then is SIGSTOPped; TryAcquire, Acquire, Extend and Release each get a 300 ms deadline: how late do they return?",
		declaredOverrun, runHung},
}

// ScenarioNames lists the scenarios in table order.
func ScenarioNames() []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.name
	}
	return out
}

func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// contenders is how many goroutines contend in the contention scenario:
// two Lockers with four goroutines each.
const contenders = 2 * 4

func runContention(ctx context.Context, f *fixture, _ lockswap.Guarantees, iterations int) Cell {
	const lockers, perLocker = 2, contenders / 2
	var res fenced.Resource
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	// givenBack counts acquisitions the library gave back with ErrInvalid
	// (the attempt took the whole TTL on a starved CPU); they are retried.
	givenBack := 0
	// waiting counts goroutines inside Acquire; contended counts critical
	// sections during which another goroutine was waiting for the lock.
	// Without one, exclusion was never tested.
	var waiting, contended atomic.Int64
	for i := 0; i < lockers; i++ {
		lk, err := f.locker(f.newLocker)
		if err != nil {
			return Cell{Outcome: NotRun, Detail: err.Error()}
		}
		for g := 0; g < perLocker; g++ {
			wg.Add(1)
			go func(holder string) {
				defer wg.Done()
				for r := 0; r < iterations; r++ {
					waiting.Add(1)
					l, err := lk.Acquire(ctx, "contention", lockswap.WithTTL(f.ttl),
						lockswap.WithRetry(lockswap.JitterRetry(time.Millisecond, 5*time.Millisecond)))
					waiting.Add(-1)
					if errors.Is(err, lockswap.ErrInvalid) && ctx.Err() == nil {
						// The key and TTL are valid: the attempt took the
						// whole TTL on a starved CPU and the lock was given
						// back. Neither exclusion nor an outage; try again.
						mu.Lock()
						givenBack++
						mu.Unlock()
						r--
						continue
					}
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
					res.Enter(holder)
					runtime.Gosched()
					if waiting.Load() > 0 {
						contended.Add(1)
					}
					res.Exit()
					l.Release(ctx)
				}
			}(fmt.Sprintf("%d/%d", i, g))
		}
	}
	wg.Wait()
	st := res.Stats()
	c := Cell{Outcome: heldIf(st.Overlaps == 0), Overlaps: st.Overlaps,
		Detail: fmt.Sprintf("%d critical sections, %d overlapped; in %d another goroutine was waiting for the lock", st.Entries, st.Overlaps, contended.Load())}
	if givenBack > 0 {
		c.Detail += fmt.Sprintf("; %d acquisitions took their whole TTL on this machine and were given back (retried)", givenBack)
	}
	switch {
	case st.Overlaps > 0:
	case firstErr != nil:
		// An acquire that gave up is harness trouble (the budget, servers
		// gone), not a measurement of exclusion.
		c.Outcome = NotRun
		c.Detail += "; an acquire failed: " + errText(firstErr)
	case contended.Load() == 0:
		c.Outcome = NotRun
		c.Detail += ": too few iterations to test exclusion (raise --iterations)"
	}
	return c
}

// acquireEventually polls TryAcquire until it succeeds or d passes. When
// the time runs out during an attempt, the error is the attempt before's.
func acquireEventually(ctx context.Context, lk lockswap.Locker, key string, ttl, d time.Duration) (lockswap.Lock, error) {
	ctx, cancel := bounded(ctx, d)
	defer cancel()
	return acquire.Retry(ctx, lockswap.ConstantRetry(10*time.Millisecond), func(ctx context.Context) (lockswap.Lock, error) {
		return lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
	})
}

// acquireFirst takes the scenario's first lock, before any fault. On a
// loaded machine (the race detector, tests of other packages running
// alongside) a redlock instance timeout of a few milliseconds can expire
// before a healthy server answers; that is a transient outage, not the
// behaviour the scenario measures, so the attempt is retried for a bounded
// time (the keys are fresh: nobody else holds them).
func acquireFirst(ctx context.Context, lk lockswap.Locker, key string, ttl time.Duration) (lockswap.Lock, error) {
	l, _, err := acquireFirstTimed(ctx, lk, key, ttl)
	return l, err
}

// acquireFirstTimed is acquireFirst that also returns when the successful
// attempt started.
func acquireFirstTimed(ctx context.Context, lk lockswap.Locker, key string, ttl time.Duration) (lockswap.Lock, time.Time, error) {
	ctx, cancel := bounded(ctx, 5*time.Second)
	defer cancel()
	var start time.Time
	l, err := acquire.Retry(ctx, lockswap.ConstantRetry(20*time.Millisecond), func(ctx context.Context) (lockswap.Lock, error) {
		start = time.Now()
		return lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
	})
	return l, start, err
}

func runPause(ctx context.Context, f *fixture, g lockswap.Guarantees, _ int) Cell {
	a, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	b, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	var res fenced.Resource
	la, err := acquireFirst(ctx, a, "pause", f.ttl)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: "the first acquire, before any fault, failed: " + errText(err)}
	}
	res.Enter("A")
	if f.fault != nil { // stop the holder's keepalive (etcd)
		if err := f.fault(ctx); err != nil {
			return Cell{Outcome: NotRun, Detail: "pause: " + err.Error()}
		}
	}
	// A is paused: it neither extends nor releases. B waits for the key.
	lb, err := acquireEventually(ctx, b, "pause", f.ttl, 10*f.ttl+10*time.Second)
	switch {
	case err != nil && !errors.Is(err, lockswap.ErrHeld):
		// An outage is not exclusion: nothing was measured.
		return Cell{Outcome: NotRun, Detail: "the second client could not reach the servers: " + err.Error()}
	case err != nil:
		return Cell{Outcome: Held, Detail: "second client never acquired: " + err.Error()}
	}
	res.Enter("B")
	if f.heal != nil {
		f.heal()
	}
	write := func(holder string, l lockswap.Lock) error {
		if fence, ok := l.Fence(); ok {
			return res.Write(holder, fence)
		}
		res.WriteUnfenced(holder)
		return nil
	}
	_ = write("B", lb)
	staleErr := write("A", la) // A wakes up and writes
	st := res.Stats()
	c := Cell{Outcome: heldIf(st.Overlaps == 0), Overlaps: st.Overlaps}
	if staleErr != nil {
		c.StaleRejected = 1
		c.Detail = "the woken holder's write was rejected by its old fence"
	} else {
		c.StaleAccepted = 1
		c.Detail = "the woken holder's write was accepted: nothing told it apart"
	}
	select {
	case <-la.Done():
		c.Detail += "; its Done had fired"
	default:
		c.Detail += "; its Done had NOT fired"
	}
	if relErr := la.Release(ctx); !errors.Is(relErr, lockswap.ErrLost) {
		c.Detail += fmt.Sprintf("; its Release returned %v (want ErrLost)", relErr)
	}
	if _, err := a.TryAcquire(ctx, "pause", lockswap.WithTTL(f.ttl)); !errors.Is(err, lockswap.ErrHeld) {
		c.Detail += "; the stale release disturbed the new holder"
		c.Outcome = Violated
	}
	lb.Release(ctx)
	return c
}

func runClockAhead(ctx context.Context, f *fixture, g lockswap.Guarantees, _ int) Cell {
	a, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	mk, detail := f.newLocker, "this backend does not read the client's wall clock; the skewed client is an ordinary one"
	if f.newSkewed != nil {
		mk = func() (lockswap.Locker, error) { return f.newSkewed(time.Hour) }
		detail = "the second client's clock runs 1h ahead"
	}
	b, err := f.locker(mk)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	la, err := acquireFirst(ctx, a, "clock", 30*time.Second)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: "the first acquire, before any fault, failed: " + errText(err)}
	}
	defer la.Release(ctx)
	lb, err := b.TryAcquire(ctx, "clock", lockswap.WithTTL(30*time.Second))
	if err == nil {
		lb.Release(ctx)
		return Cell{Outcome: Violated, Overlaps: 1, Detail: detail + ": it took over a live lock"}
	}
	if errors.Is(err, lockswap.ErrUnavailable) {
		// The servers did not answer the second client (a loaded machine,
		// a short per-instance timeout): nothing was measured.
		return Cell{Outcome: NotRun, Detail: detail + ": the second client found the servers unavailable, nothing concluded: " + err.Error()}
	}
	if !errors.Is(err, lockswap.ErrHeld) {
		return Cell{Outcome: Misreported, Detail: detail + ": " + err.Error()}
	}
	return Cell{Outcome: Held, Detail: detail + ": it was refused"}
}

// runTakeoverAfterFault: A holds; the fault happens; can B take the key
// while A's lock is still valid?
func runTakeoverAfterFault(ctx context.Context, f *fixture, g lockswap.Guarantees, _ int) Cell {
	a, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	ttl := 30 * time.Second
	if f.ttl > ttl {
		ttl = f.ttl
	}
	la, err := acquireFirst(ctx, a, "fault", ttl)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: "the first acquire, before any fault, failed: " + errText(err)}
	}
	if err := f.fault(ctx); err != nil {
		return Cell{Outcome: NotRun, Detail: "fault: " + err.Error()}
	}
	mk := f.newLocker
	if f.after != nil {
		mk = f.after
	}
	b, err := f.locker(mk)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	lb, err := acquireEventually(ctx, b, "fault", ttl, 3*time.Second)
	stillValid := time.Now().Before(la.Deadline())
	c := Cell{Detail: f.note}
	if n, ok := redlock.Grants(la); ok {
		c.Detail = join(c.Detail, fmt.Sprintf("the first lock had %d grants", n))
	}
	switch {
	case err == nil && stillValid:
		c.Outcome, c.Overlaps = Violated, 1
		c.Detail = join(c.Detail, "a second client acquired while the first lock was still valid")
		if staleWriteRejected(lb, la) {
			c.StaleRejected = 1
			c.Detail += "; the first holder's write after the second's was rejected by its older fence"
		} else {
			c.StaleAccepted = 1
			c.Detail += "; the first holder's write after the second's was accepted: nothing told it apart"
		}
		lb.Release(ctx)
	case err == nil:
		c.Outcome = NotRun
		c.Detail = join(c.Detail, "the first lock's validity ended before the check")
	default:
		c.Outcome = Held
		c.Detail = join(c.Detail, "the second client was refused: "+errText(err))
		if xerr := la.Extend(ctx, ttl); xerr != nil {
			c.Detail += "; but the holder cannot extend: " + errText(xerr)
		}
	}
	return c
}

// staleWriteRejected writes to a fresh fenced resource as the newer
// holder, then as the stale one (with their fences, where the backend has
// them), and reports whether the stale write was rejected.
func staleWriteRejected(newer, stale lockswap.Lock) bool {
	var res fenced.Resource
	write := func(holder string, l lockswap.Lock) error {
		if fence, ok := l.Fence(); ok {
			return res.Write(holder, fence)
		}
		res.WriteUnfenced(holder)
		return nil
	}
	_ = write("B", newer)
	return write("A", stale) != nil
}

func runAvailability(ctx context.Context, f *fixture, g lockswap.Guarantees, _ int) Cell {
	if err := f.fault(ctx); err != nil {
		return Cell{Outcome: NotRun, Detail: "fault: " + err.Error()}
	}
	a, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	actx, cancel := bounded(ctx, 10*time.Second)
	defer cancel()
	// Three attempts, as a caller with a short retry policy would make: a
	// single instance timeout that expires on a loaded machine is not an
	// outage, and a real outage fails all three. The detail says how many
	// attempts it took. The TTL is at least availabilityTTL: Redlock's
	// per-instance timeout is a hundredth of it, and a scenario's short TTL
	// would leave a live instance 5 ms to answer a fresh connection.
	ttl := max(f.ttl, availabilityTTL)
	start := time.Now()
	attempts := 0
	l, err := acquire.Retry(actx, lockswap.LimitedRetry(50*time.Millisecond, availabilityAttempts), func(ctx context.Context) (lockswap.Lock, error) {
		attempts++
		return a.TryAcquire(ctx, "availability", lockswap.WithTTL(ttl))
	})
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err == nil:
		rerr := l.Release(ctx)
		if rerr != nil {
			return Cell{Outcome: Misreported, Detail: "acquired, but release failed: " + errText(rerr)}
		}
		return Cell{Outcome: Available, Detail: join(f.note, fmt.Sprintf("acquired and released (%v%s)", took, attemptsNote(attempts)))}
	case errors.Is(err, lockswap.ErrUnavailable) && !errors.Is(err, lockswap.ErrHeld):
		return Cell{Outcome: Unavailable, Detail: join(f.note, fmt.Sprintf("outage error after %v%s: %s", took, attemptsNote(attempts), errText(err)))}
	default:
		return Cell{Outcome: Misreported, Detail: join(f.note, fmt.Sprintf("wrong error after %v%s: %s", took, attemptsNote(attempts), errText(err)))}
	}
}

// availabilityAttempts is how many times the availability scenarios try
// before they call the backend unavailable.
const availabilityAttempts = 3

// availabilityTTL is the least TTL the availability scenarios acquire
// with: a lock service's usual TTL, whose derived request timeouts (for
// Redlock 1/100 of it, 50 ms) a live server on a loaded machine meets.
const availabilityTTL = 5 * time.Second

func attemptsNote(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(", %d attempts", n)
}

func runSlow(ctx context.Context, f *fixture, g lockswap.Guarantees, _ int) Cell {
	if err := f.fault(ctx); err != nil {
		return Cell{Outcome: NotRun, Detail: "fault: " + err.Error()}
	}
	a, err := f.locker(f.newLocker)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: err.Error()}
	}
	l, start, err := acquireFirstTimed(ctx, a, "slow", f.ttl)
	if err != nil {
		return Cell{Outcome: NotRun, Detail: "acquire failed: " + errText(err)}
	}
	took := time.Since(start)
	validity := l.Deadline().Sub(start)
	l.Release(ctx)
	c := Cell{Outcome: Held, Detail: join(f.note, fmt.Sprintf("acquire took %v; deadline promises %v of a %v TTL",
		took.Round(time.Millisecond), validity.Round(time.Millisecond), f.ttl))}
	if validity > f.ttl {
		c.Outcome = Violated
		c.Detail += ": more than the TTL"
	}
	return c
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// errText is err's whole text: the notes under the table wrap it at word
// boundaries.
func errText(err error) string { return err.Error() }
