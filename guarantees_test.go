package lockswap_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

func TestRequire(t *testing.T) {
	g := lockswap.Guarantees{Backend: "x", Fencing: false, Clock: lockswap.ClockSynchronized, Nodes: 3, Tolerates: 1, Wait: lockswap.WaitQueue}
	if err := g.Require(lockswap.PropFaultTolerant, lockswap.PropFair, lockswap.PropNoPolling); err != nil {
		t.Fatalf("Require of properties g has: %v", err)
	}
	err := g.Require(lockswap.PropFencing, lockswap.PropClockIndependent)
	if !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("Require of missing properties: err = %v, want ErrInvalid", err)
	}
	for _, want := range []string{"x", "fencing", "clock-independent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := g.Require("telepathy"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "telepathy") {
		t.Errorf("unknown property: err = %v, want ErrInvalid naming it", err)
	}
	for _, p := range lockswap.Properties() {
		if _, err := g.Has(p); err != nil {
			t.Errorf("Has(%q) for a listed property: %v", p, err)
		}
	}
}

func TestStringStable(t *testing.T) {
	a := lockswap.Guarantees{Backend: "a", Fencing: true, Nodes: 1, Notes: []string{"note a"}}
	want := `backend: a
fencing token: yes
exclusion survives holder pause: no
exclusion survives failover: no
exclusion survives restart without persistence: no
clock assumption: none
faults tolerated: 0 of 1
stale release safe: no
wait style: poll
deadline overrun bound: none declared
counting semaphores: no
read-write locks: no
note: note a
`
	if s := a.String(); s != want {
		t.Errorf("String() changed; the docs table of lockswap compare is built from it:\n%s\nwant:\n%s", s, want)
	}
}

// TestEnumStrings: the clock assumptions and wait styles read as the docs
// table shows them, and a value without a name says what it is.
func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{lockswap.ClockNone, "none"},
		{lockswap.ClockBoundedDrift, "bounded drift"},
		{lockswap.ClockSynchronized, "synchronized wall clocks"},
		{lockswap.ClockAssumption(7), "ClockAssumption(7)"},
		{lockswap.ClockAssumption(-1), "ClockAssumption(-1)"},
		{lockswap.WaitPoll, "poll"},
		{lockswap.WaitNotify, "notify"},
		{lockswap.WaitQueue, "fifo queue"},
		{lockswap.WaitStyle(3), "WaitStyle(3)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestEveryPropertyKnown: Has answers for every property Properties lists,
// and a backend that has them all (fair waiting, fencing, ...) requires
// each without error.
func TestEveryPropertyKnown(t *testing.T) {
	all := lockswap.Guarantees{Backend: "all", Fencing: true, SurvivesFailover: true, SurvivesRestart: true,
		Clock: lockswap.ClockNone, Nodes: 3, Tolerates: 1, StaleReleaseSafe: true, Wait: lockswap.WaitQueue, Permits: true, ReadWrite: true}
	for _, p := range lockswap.Properties() {
		if ok, err := all.Has(p); !ok || err != nil {
			t.Errorf("Has(%s) = %v, %v on a backend that has everything", p, ok, err)
		}
		if ok, err := (lockswap.Guarantees{Clock: lockswap.ClockSynchronized}).Has(p); ok || err != nil {
			t.Errorf("Has(%s) = %v, %v on a backend that has nothing", p, ok, err)
		}
	}
}

// TestDeadlineOverrunRow: the declared bound on how far past its deadline
// a call may return is one of the rows the docs table and compare show,
// with the bound or "none declared".
func TestDeadlineOverrunRow(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{lockswap.DeadlineGrace, "deadline overrun bound: 100ms\n"},
		{0, "deadline overrun bound: none declared\n"},
	} {
		g := lockswap.Guarantees{Backend: "x", Nodes: 1, DeadlineOverrun: c.d}
		if s := g.String(); !strings.Contains(s, c.want) {
			t.Errorf("DeadlineOverrun %v: String() =\n%s\nwant a line %q", c.d, s, c.want)
		}
	}
}
