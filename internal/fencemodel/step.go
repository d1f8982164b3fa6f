package fencemodel

import (
	"fmt"
	"strings"
)

// maxValue is the largest counter value the model can hold: c_i values
// travel in uint64 bitmasks, and v = max(c_i) + 1 must fit too.
const maxValue = 62

// setCounter writes C on instance i and keeps s.high up to date.
func (s *State) setCounter(i int, v int8) {
	if v > maxValue {
		panic(fmt.Sprintf("fencemodel: counter value %d past the model's %d: lower the bounds", v, maxValue))
	}
	s.col[i].counter = v
	if v > s.high {
		s.high = v
	}
}

// seed gives instance i a counter if it has none: the protocol's
// "if C is missing, C := TIME in µs".
func (m *Model) seed(s *State, i int) {
	if s.col[i].counter >= 0 {
		return
	}
	v := int8(0)
	switch {
	case m.B.Time.On:
		v = s.clock + s.col[i].off + m.V.SeedLead
	case m.V.Seed == SeedFromClock:
		v = s.clock
	}
	s.setCounter(i, v)
}

// Violation is a property broken by a step.
type Violation struct {
	Property string // "unique" or "ordered"
	Detail   string
}

// apply performs a on s (which it changes). It returns a description of the
// step when explain is set, and the violation the step causes, if any.
func (m *Model) apply(s *State, a Action, explain bool) (string, *Violation) {
	c, i := int(a.Client), int(a.Instance)
	cl := &s.cli[c]
	var d strings.Builder
	say := func(format string, args ...any) {
		if explain {
			fmt.Fprintf(&d, format, args...)
		}
	}
	switch a.Kind {
	case ActStart:
		cl.phase = phaseGranting
		if m.V.Guess != NoGuess {
			cl.guess = a.Value
			m.computed(s)
		}
		for o := 0; o < m.B.Clients; o++ {
			if s.cli[o].phase == phaseReturned {
				cl.after |= 1 << o
			}
		}
		say("%s calls Acquire: sends SET K NX + read C to X, Y, Z", clientName(c))
		if m.V.Guess != NoGuess {
			say(", guessing %d", cl.guess)
		}
		if cl.after != 0 {
			say(" (after %s returned)", names(cl.after, clientName))
		}

	case ActDeliverGrant:
		col := &s.col[i]
		col.grantSent[c]++
		if col.grantSent[c] > 1 {
			s.dups++
		}
		if col.holder != 0 {
			say("%s's acquire lands on %s: K held by %s, not granted", clientName(c), instName(i), clientName(int(col.holder)-1))
			break
		}
		col.holder = uint8(c + 1)
		old := col.counter
		m.seed(s, i)
		if m.V.Grant == IncrAtGrant {
			s.setCounter(i, col.counter+1)
		}
		applied := false
		switch m.V.Guess {
		case CASAtGrant:
			if col.counter < cl.guess && m.guessInBound(s, i, cl.guess) {
				s.setCounter(i, cl.guess)
				applied = true
			}
		case SetAtGrant:
			s.setCounter(i, cl.guess)
			applied = true
		}
		if applied {
			s.quiet = 0
		}
		// The client ignores replies after it has decided: such a reply
		// is as good as lost.
		if cl.phase == phaseGranting {
			col.grantReplies[c] |= 1 << col.counter
			if applied {
				col.grantApplied[c] = true
			}
		}
		say("%s's acquire lands on %s%s: granted", clientName(c), instName(i), m.clockAt(s, i))
		if old < 0 && m.B.Time.On {
			say(", C seeded %d", s.clock+col.off+m.V.SeedLead)
		}
		say(", replies c=%d", col.counter)
		if applied {
			say(" (its guess applied)")
		}
		if col.grantSent[c] > 1 {
			say(" (a retransmitted copy)")
		}

	case ActDecide:
		say("%s receives grants from %s: v = %d", clientName(c), names(a.Set, instName), a.Value)
		cl.fence = a.Value
		m.computed(s)
		if a.Value > s.high {
			s.high = a.Value
		}
		for k := range s.col {
			s.col[k].grantReplies[c] = 0
			s.col[k].grantApplied[c] = false
		}
		if m.V.WriteBack == NoWriteBack {
			v := m.returned(s, c, &d, explain)
			return d.String(), v
		}
		cl.phase = phaseWritingBack
		say("; sends the write-back of %d", a.Value)

	case ActDeliverWriteBack:
		col := &s.col[i]
		col.wbSent[c]++
		if col.wbSent[c] > 1 {
			s.dups++
		}
		v := cl.fence
		old := col.counter
		ok := false
		holds := col.holder == uint8(c+1)
		switch m.V.WriteBack {
		case CAS:
			m.seed(s, i)
			if col.counter < v {
				s.setCounter(i, v)
				ok = true
			}
		case CASIfHeld:
			if holds {
				m.seed(s, i)
				if col.counter < v {
					s.setCounter(i, v)
					ok = true
				}
			}
		case SetIfHeld:
			if holds {
				s.setCounter(i, v)
				ok = true
			}
		case SetAlways:
			s.setCounter(i, v)
			ok = true
		}
		if ok {
			s.quiet = 0
		}
		if ok && cl.phase == phaseWritingBack {
			col.wbReplied[c] = true
		}
		say("%s's write-back of %d lands on %s%s (C is %s", clientName(c), v, instName(i), m.clockAt(s, i), counterString(old))
		if old < 0 && col.counter >= 0 && col.counter != v {
			say(", seeded %d", col.counter)
		}
		if m.V.WriteBack == CASIfHeld || m.V.WriteBack == SetIfHeld {
			if holds {
				say(", %s holds K", clientName(c))
			} else {
				say(", %s does not hold K", clientName(c))
			}
		}
		if ok {
			say("): C := %d, replies 1", v)
		} else {
			say("): replies 0")
		}
		if col.wbSent[c] > 1 {
			say(" (a retransmitted copy)")
		}

	case ActReturnFast:
		for k := range s.col {
			s.col[k].grantReplies[c] = 0
			s.col[k].grantApplied[c] = false
		}
		cl.fence = cl.guess
		say("%s receives grants that applied its guess %d from %s", clientName(c), cl.guess, names(a.Set, instName))
		v := m.returned(s, c, &d, explain)
		return d.String(), v

	case ActReturn:
		for k := range s.col {
			s.col[k].wbReplied[c] = false
		}
		say("%s receives write-back replies 1 from %s", clientName(c), names(a.Set, instName))
		v := m.returned(s, c, &d, explain)
		return d.String(), v

	case ActClocks:
		m.setClocks(s, a.Value, &d, explain)

	case ActExpire:
		say("K on %s (%s's) expires or is released", instName(i), clientName(int(s.col[i].holder)-1))
		s.col[i].holder = 0

	case ActRestart, ActEvict:
		s.losses++
		if a.Kind == ActRestart {
			s.col[i].holder = 0
			say("%s restarts without persistence: K and C lost", instName(i))
		} else {
			say("%s evicts C", instName(i))
		}
		s.col[i].counter = -1
		if m.B.Time.On {
			if a.Kind == ActRestart {
				s.col[i].down = m.B.Time.Downtime
				say(" (down for %d ticks)", m.B.Time.Downtime)
			}
			break
		}
		if m.V.Seed == SeedFromClock && s.clock <= s.high {
			// The clock assumption: by the time the instance re-seeds,
			// its clock is past every value issued before the loss.
			s.clock = s.high + 1
		}
		if m.V.Seed == SeedFromClock {
			say("; the clock is now %d", s.clock)
		}

	case ActTick:
		if m.B.Time.On {
			m.tick(s, &d, explain)
			break
		}
		s.ticks++
		s.clock++
		say("the clock advances to %d", s.clock)
	}
	return d.String(), nil
}

// returned records that client c's Acquire returned its fence, and checks
// both properties against every client that returned before.
func (m *Model) returned(s *State, c int, d *strings.Builder, explain bool) *Violation {
	cl := &s.cli[c]
	cl.phase = phaseReturned
	if explain {
		fmt.Fprintf(d, "; %s's Acquire RETURNS fence %d", clientName(c), cl.fence)
	}
	for o := 0; o < m.B.Clients; o++ {
		other := &s.cli[o]
		if o == c || other.phase != phaseReturned {
			continue
		}
		if other.fence == cl.fence {
			return &Violation{Property: "unique", Detail: fmt.Sprintf("%s and %s both returned fence %d", clientName(o), clientName(c), cl.fence)}
		}
		if cl.after&(1<<o) != 0 && cl.fence <= other.fence {
			return &Violation{Property: "ordered", Detail: fmt.Sprintf("%s started after %s returned %d, and returned %d", clientName(c), clientName(o), other.fence, cl.fence)}
		}
	}
	return nil
}

// names lists the names of the members of a bitmask.
func names(mask uint8, name func(int) string) string {
	var parts []string
	for k := 0; k < 8; k++ {
		if mask&(1<<k) != 0 {
			parts = append(parts, name(k))
		}
	}
	return strings.Join(parts, ", ")
}

func counterString(v int8) string {
	if v < 0 {
		return "missing"
	}
	return fmt.Sprint(v)
}
