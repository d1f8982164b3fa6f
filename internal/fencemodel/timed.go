package fencemodel

import (
	"fmt"
	"math/bits"
	"strings"
)

// The timed mode (Bounds.Time.On). The untimed model takes the clock
// assumption A3 of docs/redlock-fencing.md as an axiom: at a loss the one
// clock jumps past every value issued. The timed mode drops the axiom and
// models what makes A3 true in the implementation, so that the model checks
// A3 instead of assuming it:
//
//   - Time is integer ticks of a reference clock R; ActTick advances it, at
//     any step, up to Timing.Ticks times in a run (0: without bound, which
//     normalizeTimed keeps finite, but too large to explore even for two
//     clients). Counters, fences and guesses are in the same unit (the
//     implementation's microsecond).
//   - Instance i's clock is R + off_i, off_i fixed (ActClocks, the first
//     step) anywhere in [0, Skew]: R is the slowest instance's clock, and
//     the instances' clocks agree within Skew ticks.
//   - A missing counter is seeded at the instance's clock + SeedLead (the
//     protocol's L, fence_seed).
//   - The acquire script applies a guess g only if g > C and (g = C + 1 or
//     g <= its clock + GuessAhead) (fence_guess; the protocol has
//     GuessAhead = SeedLead = L).
//   - A client guesses (ActStart) its clock + GuessAhead − Margin, its clock
//     being R + cs for any cs in [−ClientSkew, ClientSkew], or one above a
//     fence returned before it starts (its hint): fenceHints sends the
//     higher of the two, and offering each covers the higher one.
//   - Losses happen at any step, without any clock jump: a restart loses K
//     and C and the instance runs no script for Downtime ticks; an eviction
//     loses C only and is possible once no counter took a value by a
//     compare-and-set for Gap ticks (A3's "time between the key's last
//     fence and the seed": an eviction has no downtime to provide it).
//   - Rate: at most Rate fences (a guess at ActStart, a v at ActDecide) are
//     computed per tick (0: no limit), A3's "fewer than one fence per
//     microsecond": a value one above a counter runs at most one tick
//     ahead of the clocks.
//
// The untimed reductions that depend on the axiom (normalize) are replaced
// by normalizeTimed.

// Timing holds the timed mode's parameters, in ticks.
type Timing struct {
	// On selects the timed mode.
	On bool
	// Skew: the instances' clocks are R + off_i, off_i in [0, Skew]
	// (every assignment is explored); at most 4.
	Skew int8
	// ClientSkew: a client's clock is R + cs, cs in [−ClientSkew,
	// ClientSkew] (every value is explored).
	ClientSkew int8
	// Margin: a client guesses its clock + GuessAhead − Margin (the
	// implementation's clockGuessMargin).
	Margin int8
	// Downtime: a restarted instance runs no script for that many ticks.
	Downtime uint8
	// Gap: an eviction happens only when no compare-and-set installed a
	// value for at least Gap ticks.
	Gap uint8
	// Rate: at most Rate fences computed per tick; 0: no limit.
	Rate uint8
	// Ticks, if positive, bounds the ticks of a run; 0: no bound.
	Ticks uint8
}

// The timed variants: the protocol with the lead L, and the rules it was
// changed from. In the model L = 3 ticks (its size relative to the clocks
// only decides how often a guess is accepted: safety depends on the seed's
// lead not being below the guess bound's).
var (
	// LeadProtocol is the protocol with its fast path (redlock): seed at
	// clock + L, guesses accepted up to clock + L.
	LeadProtocol = Variant{Name: "protocol+fast-path, lead L", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock, Guess: CASAtGrant, SeedLead: 3, GuessAhead: 3}
	// LeadProtocolNoFastPath is the protocol without guesses, seeds at
	// clock + L.
	LeadProtocolNoFastPath = Variant{Name: "protocol, lead L", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock, SeedLead: 3, GuessAhead: 3}
	// SeedNoLead (f): the seed is the bare clock while guesses are
	// accepted up to clock + L: the pre-change bug, a fence could run
	// ahead of a later seed.
	SeedNoLead = Variant{Name: "(f) seed without the lead, guesses up to clock + L", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock, Guess: CASAtGrant, SeedLead: 0, GuessAhead: 3}
	// GuessPastLead (g): guesses accepted up to clock + 2L (and clients
	// guessing up to that), seeds at clock + L: a guess applied runs ahead
	// of a later seed.
	GuessPastLead = Variant{Name: "(g) guess bound 2L above the clock, seeds L above", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock, Guess: CASAtGrant, SeedLead: 3, GuessAhead: 6}
)

// clockChoices appends the ActClocks steps (one per assignment of offsets
// with off_X = 0 and off_X <= off_Y <= off_Z: R names the slowest clock,
// and the symmetry reduction sorts instances anyway) before the clocks are
// set; after, nothing (the state is final: every client returned).
func (m *Model) clockChoices(s *State, out []Action) []Action {
	if s.clocksSet {
		return out // every client returned: no step can break a property
	}
	sk := m.B.Time.Skew
	if sk < 0 || sk > 4 {
		panic(fmt.Sprintf("fencemodel: Skew %d, want 0 to 4", sk))
	}
	for y := int8(0); y <= sk; y++ {
		for z := y; z <= sk; z++ {
			out = append(out, Action{Kind: ActClocks, Value: y*(sk+1) + z*(sk+1)*(sk+1)})
		}
	}
	return out
}

// clockOffsets decodes an ActClocks value: off_i is digit i in base
// Skew+1.
func (m *Model) clockOffsets(v int8) [N]int8 {
	var off [N]int8
	b := m.B.Time.Skew + 1
	for i := range off {
		off[i] = v % b
		v /= b
	}
	return off
}

// encodeOffsets is clockOffsets' inverse.
func (m *Model) encodeOffsets(off [N]int8) int8 {
	var v int8
	b := m.B.Time.Skew + 1
	for i := N - 1; i >= 0; i-- {
		v = v*b + off[i]
	}
	return v
}

// setClocks performs ActClocks.
func (m *Model) setClocks(s *State, v int8, d *strings.Builder, explain bool) {
	off := m.clockOffsets(v)
	s.clocksSet = true
	for i := range s.col {
		s.col[i].off = off[i]
	}
	if explain {
		fmt.Fprintf(d, "the clocks: X at R+%d, Y at R+%d, Z at R+%d (R = %d)", off[0], off[1], off[2], s.clock)
	}
}

// allReturned says whether every client's Acquire has returned: no later
// step can break a property (both are checked at a return), so the state
// needs no successors.
func (m *Model) allReturned(s *State) bool {
	for c := 0; c < m.B.Clients; c++ {
		if s.cli[c].phase != phaseReturned {
			return false
		}
	}
	return true
}

// rateAllows says whether one more fence may be computed before the next
// tick (Timing.Rate).
func (m *Model) rateAllows(s *State) bool {
	return m.B.Time.Rate == 0 || s.burst < m.B.Time.Rate
}

// computed counts a fence computed (a guess, a v) against the rate.
func (m *Model) computed(s *State) {
	if m.B.Time.On && m.B.Time.Rate > 0 {
		s.burst++
	}
}

// noGuess is a guess that never applies: one below every counter, present
// or future (all are at least min(R, the values present), which the
// normalization makes 0), so none equals it, nor it minus one.
const noGuess = -1

// timedStarts appends client c's ActStart steps: without a fast path one;
// with it, one per distinct guess: the client's clock's guess for every
// clock it may have, and one above each fence returned so far (its hint).
func (m *Model) timedStarts(s *State, c int, out []Action) []Action {
	if m.V.Guess == NoGuess {
		return append(out, Action{Kind: ActStart, Client: int8(c)})
	}
	if !m.rateAllows(s) {
		return out
	}
	var seen [2]uint64
	add := func(g int8) {
		if g < 0 {
			g = noGuess
		}
		if g > maxValue {
			panic(fmt.Sprintf("fencemodel: guess %d past the model's %d", g, maxValue))
		}
		k := int(g) + 1
		if seen[k/64]&(1<<(k%64)) != 0 {
			return
		}
		seen[k/64] |= 1 << (k % 64)
		out = append(out, Action{Kind: ActStart, Client: int8(c), Value: g})
	}
	t := &m.B.Time
	for cs := -t.ClientSkew; cs <= t.ClientSkew; cs++ {
		add(s.clock + cs + m.V.GuessAhead - t.Margin)
	}
	for o := 0; o < m.B.Clients; o++ {
		if s.cli[o].phase == phaseReturned {
			add(s.cli[o].fence + 1)
		}
	}
	return out
}

// guessInBound is the acquire script's bound on a guess g > C at instance
// i: g = C + 1, or g at most its clock + GuessAhead. The untimed mode has
// no bound (its proofs need none, and it takes A3 as given).
func (m *Model) guessInBound(s *State, i int, g int8) bool {
	if !m.B.Time.On {
		return true
	}
	return g == s.col[i].counter+1 || g <= s.clock+s.col[i].off+m.V.GuessAhead
}

// clockAt describes instance i's clock for traces (timed mode).
func (m *Model) clockAt(s *State, i int) string {
	if !m.B.Time.On {
		return ""
	}
	if s.col[i].down > 0 {
		return fmt.Sprintf(" (clock %d, down)", s.clock+s.col[i].off)
	}
	return fmt.Sprintf(" (clock %d)", s.clock+s.col[i].off)
}

// tick performs ActTick in the timed mode.
func (m *Model) tick(s *State, d *strings.Builder, explain bool) {
	s.clock++
	s.ticks++
	s.burst = 0
	if s.quiet < m.B.Time.Gap {
		s.quiet++
	}
	for i := range s.col {
		if s.col[i].down > 0 {
			s.col[i].down--
		}
	}
	if explain {
		fmt.Fprintf(d, "tick: R = %d", s.clock)
	}
}

// normalizeTimed is the timed mode's normalize: it maps s to a state with
// the same futures up to a renaming of values (so both break the properties
// together), merging states that differ only where nothing can tell:
//
//   - Retransmissions used up: as in normalize.
//   - A returned client's "after" set: read only at its own return.
//   - The guess of a client that has decided and whose acquire scripts can
//     no longer run: read only by those scripts and by ActReturnFast (not
//     enabled after the decision).
//   - K's holder when no client is idle and no acquire script can run any
//     more: read only by the acquire script (the hold-check variants also
//     read it in the write-back: not for them).
//   - The reference clock far ahead of every value: see capClock.
//   - Translation: every step compares values, adds constants to them or
//     to a clock, and takes maxima, so adding the same constant to every
//     value and to R changes no step's outcome; normalizeTimed subtracts
//     the lowest of R and the values present (R >= 0 and every value >= 0
//     afterwards: what noGuess relies on).
//
// It returns what traces show: by how much the values were translated
// down, and R before capClock lowered it (-1: not lowered).
func (m *Model) normalizeTimed(s *State) (shift, capped int8) {
	s.high = -1
	if m.B.Time.Ticks == 0 {
		s.ticks = 0
	}
	if int(s.dups) == m.B.Retransmissions {
		for i := range s.col {
			for c := range s.cli {
				s.col[i].grantSent[c] = min(s.col[i].grantSent[c], 1)
				s.col[i].wbSent[c] = min(s.col[i].wbSent[c], 1)
			}
		}
	}
	idle, pending := false, false
	for c := 0; c < m.B.Clients; c++ {
		cl := &s.cli[c]
		if cl.phase == phaseIdle {
			idle = true
			continue
		}
		if cl.phase == phaseReturned {
			cl.after = 0
		}
		runs := false
		for i := range s.col {
			if m.deliverable(s, s.col[i].grantSent[c]) {
				runs = true
			}
		}
		pending = pending || runs
		if !runs && cl.phase >= phaseWritingBack {
			cl.guess = noGuess
		}
	}
	if !idle && !pending && m.V.WriteBack != CASIfHeld && m.V.WriteBack != SetIfHeld {
		for i := range s.col {
			s.col[i].holder = 0
		}
	}
	lossesLeft := int(s.losses) < m.B.Losses
	computing := false // a client may still compute a fence (Rate)
	for c := 0; c < m.B.Clients; c++ {
		computing = computing || s.cli[c].phase <= phaseGranting
	}
	if !computing {
		s.burst = 0
	}
	if !lossesLeft {
		s.quiet = m.B.Time.Gap
	}
	if !s.clocksSet {
		return 0, -1
	}
	for c := 0; c < m.B.Clients; c++ {
		if m.guessDead(s, c, lossesLeft) {
			s.cli[c].guess = noGuess
		}
	}
	capped = -1
	if r := s.clock; m.capClock(s) {
		capped = r
	}
	base := s.clock
	forValues(s, func(v *int8) { base = min(base, *v) })
	for i := range s.col {
		for c := range s.cli {
			if r := s.col[i].grantReplies[c]; r != 0 {
				base = min(base, int8(bits.TrailingZeros64(r)))
			}
		}
	}
	if base == 0 {
		return 0, capped
	}
	s.clock -= base
	forValues(s, func(v *int8) { *v -= base })
	for i := range s.col {
		for c := range s.cli {
			s.col[i].grantReplies[c] >>= uint(base)
		}
	}
	return base, capped
}

// guessDead says whether client c's guess can never apply any more, nor be
// returned: it has applied nowhere yet (no reply saying so in flight), and
// it is at most every counter present (counters only go up, but by a loss),
// and at most every seed to come (a missing counter's, or, with losses
// left, any instance's: at least R + SeedLead, R only goes up). Then no
// acquire script finds C < g, and the guess is as good as noGuess.
func (m *Model) guessDead(s *State, c int, lossesLeft bool) bool {
	g := s.cli[c].guess
	if g < 0 || s.cli[c].phase == phaseIdle {
		return false
	}
	if lossesLeft && g > s.clock+m.V.SeedLead {
		return false
	}
	for i := range s.col {
		col := &s.col[i]
		if col.grantApplied[c] {
			return false
		}
		if col.counter >= 0 && g > col.counter || col.counter < 0 && g > s.clock+col.off+m.V.SeedLead {
			return false
		}
	}
	return true
}

// forValues calls f on every value present in s other than the c_i in
// flight: the counters, fences and guesses (-1: absent).
func forValues(s *State, f func(v *int8)) {
	for i := range s.col {
		if s.col[i].counter >= 0 {
			f(&s.col[i].counter)
		}
	}
	for c := range s.cli {
		if s.cli[c].fence >= 0 {
			f(&s.cli[c].fence)
		}
		if s.cli[c].guess >= 0 {
			f(&s.cli[c].guess)
		}
	}
}

// capClock lowers R to V + T when it is above, V the highest value
// present. Why that is sound: every value to come is either derived from R
// (a seed: R + off + SeedLead; a clock's guess: R + cs + GuessAhead −
// Margin; at least R + low, low <= 0 below) or a value present plus at most
// rem (the +1s still to come: each idle client can compute a guess one
// above a fence and a v one above a counter, each granting client a v).
// With R >= V + rem + 2 − low, every value derived from R is at least 2
// above every value derived from those present, now and later, whatever R
// is: the comparisons C < v, g = C + 1, g <= clock + GuessAhead and the
// maxima come out the same for every such R, and the values derived from R
// differ between two such states by the same constant. So the states for
// all R >= V + T have the same futures up to that constant, and one stands
// for all. With nothing present, the translation alone makes R = 0. It
// says whether it lowered R.
func (m *Model) capClock(s *State) bool {
	v := int8(-1)
	forValues(s, func(x *int8) { v = max(v, *x) })
	for i := range s.col {
		for c := range s.cli {
			if r := s.col[i].grantReplies[c]; r != 0 {
				v = max(v, int8(63-bits.LeadingZeros64(r)))
			}
		}
	}
	if v < 0 || m.V.Grant == IncrAtGrant { // INCR at grant: more +1s; not capped
		return false
	}
	rem := int8(0)
	for c := 0; c < m.B.Clients; c++ {
		switch s.cli[c].phase {
		case phaseIdle:
			rem += 2
		case phaseGranting:
			rem++
		}
	}
	t := &m.B.Time
	low := min(0, m.V.SeedLead, m.V.GuessAhead, m.V.GuessAhead-t.Margin-t.ClientSkew)
	if limit := v + rem + 2 - low; s.clock > limit {
		s.clock = limit
		return true
	}
	return false
}
