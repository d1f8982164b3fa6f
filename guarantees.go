package lockswap

import (
	"fmt"
	"strings"
	"time"
)

// ClockAssumption is what a backend assumes about clocks for its safety.
type ClockAssumption int

const (
	// ClockNone: safety does not depend on any client's clock; expiry is
	// measured by the servers.
	ClockNone ClockAssumption = iota
	// ClockBoundedDrift: clocks may disagree, but their rates drift by a
	// bounded factor (the Redlock assumption; covered by the drift term).
	ClockBoundedDrift
	// ClockSynchronized: clients' wall clocks must agree; a client whose
	// clock runs ahead can take a live lock (legacy SETNX timestamps).
	ClockSynchronized
)

// String returns "none", "bounded drift" or "synchronized wall clocks".
func (c ClockAssumption) String() string {
	return enumName("ClockAssumption", int(c), "none", "bounded drift", "synchronized wall clocks")
}

// enumName returns names[v], or typ(v) for a value without a name.
func enumName(typ string, v int, names ...string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// WaitStyle is how Acquire waits for a held lock.
type WaitStyle int

const (
	// WaitPoll: retry after a delay (per [RetryStrategy]).
	WaitPoll WaitStyle = iota
	// WaitNotify: woken by the server when the lock is freed, no order.
	WaitNotify
	// WaitQueue: woken in arrival order (first come, first served).
	WaitQueue
)

// String returns "poll", "notify" or "fifo queue".
func (w WaitStyle) String() string {
	return enumName("WaitStyle", int(w), "poll", "notify", "fifo queue")
}

// Guarantees describes what a backend keeps under which faults. It is data:
// the docs table, `lockswap compare` and configuration requirements
// (require=fencing) are all derived from it, and every field is
// demonstrated by a test, including the properties a backend does not keep.
type Guarantees struct {
	// Backend is the backend's short name ("redlock", "singleredis", ...).
	Backend string
	// Fencing: Lock.Fence returns a number that strictly increases across
	// holders, so a resource can reject a holder that paused past its
	// validity.
	Fencing bool
	// SurvivesHolderPause: exclusion holds even when a holder pauses longer
	// than its validity and then acts. No lease-based lock keeps this on its
	// own; fencing is how the resource catches the stale holder.
	SurvivesHolderPause bool
	// SurvivesFailover: exclusion holds when a server fails over to a
	// replica (Redis async replica, etcd leader loss).
	SurvivesFailover bool
	// SurvivesRestart: exclusion holds when a server restarts without
	// persistence.
	SurvivesRestart bool
	// Clock is what safety assumes about clocks.
	Clock ClockAssumption
	// Nodes is the number of servers the lock uses, and Tolerates how many of
	// them may be down while clients still acquire and release.
	Nodes, Tolerates int
	// StaleReleaseSafe: a release by a former holder never removes the next
	// holder's lock.
	StaleReleaseSafe bool
	// Wait is how Acquire waits.
	Wait WaitStyle
	// DeadlineOverrun bounds how long past its context's deadline any call
	// of the backend's Lockers and Locks (Acquire, TryAcquire, Extend,
	// Release) may return, whatever the servers do: answer, refuse, answer
	// late, or accept and never answer (a hung or SIGSTOPped server). The
	// scheduling delays of a loaded machine come on top. Zero means no
	// bound is declared. Every built-in backend declares [DeadlineGrace].
	DeadlineOverrun time.Duration
	// Permits: the backend gives counting semaphores ([WithPermits]). A
	// backend without them refuses the option with [ErrInvalid], and its
	// Notes say why.
	Permits bool
	// ReadWrite: the backend gives read-write locks ([WithRead],
	// [WithWrite]). A backend without them refuses both options with
	// [ErrInvalid].
	ReadWrite bool
	// Notes are short caveats, one sentence each.
	Notes []string
}

// Property names one requirement configuration can state (require=...).
type Property string

// The properties [Guarantees.Has] knows.
const (
	PropFencing          Property = "fencing"
	PropFailover         Property = "failover"
	PropRestart          Property = "restart"
	PropClockIndependent Property = "clock-independent"
	PropFaultTolerant    Property = "fault-tolerant"
	PropStaleReleaseSafe Property = "stale-release-safe"
	PropNoPolling        Property = "no-polling"
	PropFair             Property = "fair"
	PropSemaphores       Property = "semaphores"
	PropRWLocks          Property = "rwlocks"
)

// properties says, for each [Property] in a stable order, whether a
// Guarantees provides it.
var properties = []struct {
	p   Property
	has func(Guarantees) bool
}{
	{PropFencing, func(g Guarantees) bool { return g.Fencing }},
	{PropFailover, func(g Guarantees) bool { return g.SurvivesFailover }},
	{PropRestart, func(g Guarantees) bool { return g.SurvivesRestart }},
	{PropClockIndependent, func(g Guarantees) bool { return g.Clock != ClockSynchronized }},
	{PropFaultTolerant, func(g Guarantees) bool { return g.Tolerates > 0 }},
	{PropStaleReleaseSafe, func(g Guarantees) bool { return g.StaleReleaseSafe }},
	{PropNoPolling, func(g Guarantees) bool { return g.Wait != WaitPoll }},
	{PropFair, func(g Guarantees) bool { return g.Wait == WaitQueue }},
	{PropSemaphores, func(g Guarantees) bool { return g.Permits }},
	{PropRWLocks, func(g Guarantees) bool { return g.ReadWrite }},
}

// Properties lists every [Property] in a stable order.
func Properties() []Property {
	out := make([]Property, len(properties))
	for i, p := range properties {
		out[i] = p.p
	}
	return out
}

// Has reports whether g provides p. It returns an error matching
// [ErrInvalid] for an unknown property.
func (g Guarantees) Has(p Property) (bool, error) {
	for _, q := range properties {
		if q.p == p {
			return q.has(g), nil
		}
	}
	return false, fmt.Errorf("unknown property %q (known: %v): %w", p, Properties(), ErrInvalid)
}

// Require returns nil when g has every property in props, and otherwise an
// error matching [ErrInvalid] that names the backend and what is missing.
func (g Guarantees) Require(props ...Property) error {
	var missing []string
	for _, p := range props {
		ok, err := g.Has(p)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, string(p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("backend %s lacks required %s: %w", g.Backend, strings.Join(missing, ", "), ErrInvalid)
	}
	return nil
}

// String renders g as stable "label: value" lines: the backend, one line
// per property in a fixed order, then one line per note. The docs table of
// `lockswap compare` is built from these lines.
func (g Guarantees) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend: %s\n", g.Backend)
	for _, p := range g.rows() {
		fmt.Fprintf(&b, "%s: %s\n", p.label, p.value)
	}
	for _, n := range g.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// row is one property line of [Guarantees.String].
type row struct{ label, value string }

// rows returns g's properties as labelled values, in their stable order.
func (g Guarantees) rows() []row {
	return []row{
		{"fencing token", yesNo(g.Fencing)},
		{"exclusion survives holder pause", yesNo(g.SurvivesHolderPause)},
		{"exclusion survives failover", yesNo(g.SurvivesFailover)},
		{"exclusion survives restart without persistence", yesNo(g.SurvivesRestart)},
		{"clock assumption", g.Clock.String()},
		{"faults tolerated", fmt.Sprintf("%d of %d", g.Tolerates, g.Nodes)},
		{"stale release safe", yesNo(g.StaleReleaseSafe)},
		{"wait style", g.Wait.String()},
		{"deadline overrun bound", overrun(g.DeadlineOverrun)},
		{"counting semaphores", yesNo(g.Permits)},
		{"read-write locks", yesNo(g.ReadWrite)},
	}
}

// overrun renders a DeadlineOverrun: the bound, or "none declared".
func overrun(d time.Duration) string {
	if d <= 0 {
		return "none declared"
	}
	return d.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
