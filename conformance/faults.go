package conformance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// Slack is the least [RunFaults] allows a call past its context's
// deadline: the bound every built-in backend declares in its Guarantees
// (DeadlineOverrun, which is lockswap.DeadlineGrace) plus a scheduling
// floor of 200 ms for a loaded machine running the race detector. On top
// of it each call is allowed [LagFactor] times the scheduling lag a
// [LagProbe] measured while it ran ([LagProbe.Allowance]).
// `lockswap compare` checks its hung-server scenario against the same sum:
// a backend's declared DeadlineOverrun plus the same allowance.
const Slack = lockswap.DeadlineGrace + 200*time.Millisecond

// Fault is a way a backend's servers misbehave, for [RunFaults] and
// [RunMatrix].
type Fault struct {
	// Name names the fault: "no-reply" (a listener that accepts and never
	// answers), "paused" (a SIGSTOPped server), "slow" (every reply
	// delayed by 10 s), "refused" (nothing listens any more: connections
	// are refused, open ones closed), "reset" (every connection closed as
	// soon as it is made), "tls-to-plain" (TLS to a server that speaks
	// plain text).
	Name string
	// NewLocker returns a new Locker whose servers work until start is
	// called and misbehave from then on, until the test ends; start is
	// nil for a fault that is on from the start (the cells that need a
	// lock taken before the fault are then skipped). The suite closes the
	// Locker. Each call makes servers of its own, or ones that the fault
	// of another call does not touch.
	NewLocker func(t *testing.T) (lk lockswap.Locker, start func())
	// FromStart tells that the fault is on from the start (NewLocker
	// returns a nil start) before NewLocker is called: the cells that
	// need a lock taken before the fault are then skipped without making
	// a Locker.
	FromStart bool
	// Open, when set, opens a new Locker the way users do
	// (registry.OpenURL of a URL naming the servers) with the fault
	// already on, under ctx: the Open row of [RunMatrix].
	Open func(t *testing.T, ctx context.Context) (lockswap.Locker, error)
	// Want is the sentinel the calls' errors match under the fault; nil
	// means lockswap.ErrUnavailable (a retry may fix it).
	Want error
	// CloseBound is how long Close may take under the fault when the
	// backend declares more than its default bound for this client
	// (docs/errors.md); 0 means that default, a second.
	CloseBound time.Duration
}

// Overruns records, per case, the worst time a call took past its
// deadline (negative: it returned before), for reports ("worst overrun").
// RunFaults adds to it.
type Overruns struct {
	mu    sync.Mutex
	worst map[string]time.Duration
}

func (o *Overruns) add(name string, d time.Duration) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.worst == nil {
		o.worst = map[string]time.Duration{}
	}
	if cur, ok := o.worst[name]; !ok || d > cur {
		o.worst[name] = d
	}
}

// Worst returns the worst overrun recorded under each case name.
func (o *Overruns) Worst() map[string]time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]time.Duration, len(o.worst))
	for k, v := range o.worst {
		out[k] = v
	}
	return out
}

// Summary returns the n worst overruns recorded, worst first, on one
// line with the number of cases: short enough that a failing suite's own
// errors stay in view above it in a test log.
func (o *Overruns) Summary(n int) string {
	worst := o.Worst()
	names := make([]string, 0, len(worst))
	for k := range worst {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if worst[names[i]] != worst[names[j]] {
			return worst[names[i]] > worst[names[j]]
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "worst overruns of %d cases:", len(names))
	for i, k := range names[:min(n, len(names))] {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %v", k, worst[k].Round(time.Millisecond))
	}
	return b.String()
}

// RunFaults runs the promise matrix ([RunMatrix]) of a backend with one
// client: every call keeps its bound under each fault, whatever its
// context, and its error has the right class. ttl is the lock TTL the
// cells use. o, when not nil, records the overruns measured.
func RunFaults(t *testing.T, ttl time.Duration, faults []Fault, o *Overruns) {
	t.Helper()
	RunMatrix(t, Matrix{TTL: ttl, Clients: []MatrixClient{{Faults: faults}}, Overruns: o})
}
