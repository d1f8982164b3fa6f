// Package fencemodel is an exhaustive model check of the Redlock fencing
// protocol of docs/redlock-fencing.md: N = 3 Redis instances, a few clients
// acquiring one key, and every interleaving of the network (requests and
// replies delivered late, never, or twice), key expiry, instance restarts
// without persistence, counter eviction and clock ticks, within bounds. On
// every path it checks the two properties the protocol promises:
//
//   - Unique: no two acquisitions return the same fence.
//   - Ordered: if B's Acquire started after A's returned, B's fence > A's.
//
// The same explorer runs the protocol and the broken variants it was
// chosen over (see Variant), and finds a counterexample in each of those.
//
// The model is deliberately close to the protocol text; each step (Action)
// names the protocol line it stands for. It abstracts only where the
// abstraction keeps every behaviour of the real system (an
// over-approximation, so that "no violation" carries over):
//
//   - Time does not exist except as the order of steps. A key may expire at
//     any step (ActExpire), whatever its TTL; a client may pause for as long
//     as it likes between any two of its steps (nothing forces it to move).
//   - Release and undo are compare-and-delete of the client's own key and
//     never touch the counter, so their effect on an instance is the same
//     as an expiry of that key at the moment the request lands: ActExpire
//     covers them.
//   - The validity check of Redlock is left out: it only makes a client
//     fail more often, and the properties must hold whatever the timing.
//   - A retry, or a second Acquire by the same process, is a new client with
//     a new token: each model client makes one attempt.
//   - A client sends its write-back to all N instances (the protocol sends
//     it to the granting ones; a request never delivered is the same as one
//     not sent, so sending more covers sending fewer).
//   - A lost message is one never delivered; a retransmitted one is
//     delivered again (Bounds.Retransmissions). A client receives replies
//     in any order and decides on any majority of those that have arrived
//     (ActDecide, ActReturn); a reply that arrives later is ignored.
//
// The timed mode (Bounds.Time, timed.go) replaces the first point: it
// gives each instance a clock, seeds and bounds guesses against it as the
// implementation does, and lets counters be lost at any step with no clock
// jump, so that the clock assumption A3 is checked, not assumed.
//
// Run it with go test; docs/redlock-fencing.md gives the bounds, the
// commands and the state counts.
package fencemodel

import "math/bits"

// N is the number of Redis instances in the model.
const N = 3

// Majority is the quorum of the protocol: floor(N/2)+1.
const Majority = N/2 + 1

// MaxClients is the most clients the model can run.
const MaxClients = 3

// GrantRule says what the acquire script does with the counter when it
// sets the key.
type GrantRule uint8

const (
	// ReadAtGrant is the protocol: read C (seeding it if missing) and reply
	// it; the client computes v = max(c_i) + 1.
	ReadAtGrant GrantRule = iota
	// IncrAtGrant is the naive variant: INCR C (after seeding) and reply the
	// new value; the client computes v = max(c_i).
	IncrAtGrant
)

// WriteBackRule says what the write-back script does with v.
type WriteBackRule uint8

const (
	// NoWriteBack: there is no write-back round; Acquire returns v as soon
	// as it has a granting majority (the naive variants).
	NoWriteBack WriteBackRule = iota
	// CAS is the protocol: seed C if missing, then if C < v set C := v and
	// reply 1, else reply 0. It does not look at K.
	CAS
	// CASIfHeld is CAS done only where the client still holds K (the
	// protocol plus a hold check: shows the check is not needed).
	CASIfHeld
	// SetIfHeld is the first sketch: where the client still holds
	// K, set C := v and reply 1; no compare.
	SetIfHeld
	// SetAlways sets C := v and replies 1 everywhere: the write-back without
	// its compare.
	SetAlways
)

// GuessRule says whether the acquire script also tries a fence the client
// guessed (the one-round fast path).
type GuessRule uint8

const (
	// NoGuess: the acquire script only reads C; every acquisition takes the
	// write-back round.
	NoGuess GuessRule = iota
	// CASAtGrant is the protocol's fast path: the client sends a guess g
	// with its acquire; where the script sets K it also does the
	// write-back's compare-and-set with g (after seeding C if missing: if
	// C < g then C := g) and replies C as it leaves it and whether g was
	// applied. A client that has a majority of grants with g applied
	// returns g at once; otherwise it goes on with the write-back round,
	// v = max(c_i) + 1 over the replies as they are.
	CASAtGrant
	// SetAtGrant is the fast path without its compare: where the script
	// sets K it sets C := g (a broken variant).
	SetAtGrant
)

// SeedRule says what a missing counter is seeded with.
type SeedRule uint8

const (
	// SeedFromClock is the protocol: the instance's clock in microseconds.
	SeedFromClock SeedRule = iota
	// SeedZero seeds 0: the protocol with its restart handling removed.
	SeedZero
)

// Variant is one set of protocol rules to check.
type Variant struct {
	Name      string        // shown in logs
	Grant     GrantRule     // what the acquire script does with C
	WriteBack WriteBackRule // what the write-back script does with v
	Seed      SeedRule      // what a missing C is seeded with
	Guess     GuessRule     // whether the acquire also tries a guessed fence

	// SeedLead and GuessAhead are the timed mode's (Bounds.Time,
	// timed.go): a seed is the instance's clock + SeedLead (the protocol's
	// L), and the acquire script applies a guess g > C only if g = C + 1 or
	// g <= its clock + GuessAhead (the protocol's L again); clients guess
	// from their clocks with GuessAhead too. The untimed mode ignores them.
	SeedLead, GuessAhead int8
}

// The variants the tests check. Protocol and ProtocolHoldCheck must have no
// counterexample; every other one must have one.
var (
	// Protocol is the decided protocol of docs/redlock-fencing.md.
	Protocol = Variant{Name: "protocol", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock}
	// ProtocolHoldCheck adds "only where the client holds K" to the CAS.
	ProtocolHoldCheck = Variant{Name: "protocol+hold-check", Grant: ReadAtGrant, WriteBack: CASIfHeld, Seed: SeedFromClock}
	// NaiveRead (a): v = max(c_i)+1 over the granting replies, no write-back.
	NaiveRead = Variant{Name: "(a) naive: read at grant, no write-back", Grant: ReadAtGrant, WriteBack: NoWriteBack, Seed: SeedFromClock}
	// NaiveIncr (a'): INCR at grant, v = max(c_i), no write-back.
	NaiveIncr = Variant{Name: "(a') naive: INCR at grant, no write-back", Grant: IncrAtGrant, WriteBack: NoWriteBack, Seed: SeedFromClock}
	// SketchHeldNoCAS (b): write-back sets C := v where the client holds K.
	SketchHeldNoCAS = Variant{Name: "(b) sketch: write-back where K is held, no CAS", Grant: ReadAtGrant, WriteBack: SetIfHeld, Seed: SeedFromClock}
	// NoRestartSeed (c): the protocol with a lost counter re-seeded from 0.
	NoRestartSeed = Variant{Name: "(c) protocol, lost counter re-seeded from 0", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedZero}
	// UnconditionalWriteBack (d): the protocol's write-back without its
	// compare: C := v everywhere.
	UnconditionalWriteBack = Variant{Name: "(d) protocol without the CAS: write-back sets C := v", Grant: ReadAtGrant, WriteBack: SetAlways, Seed: SeedFromClock}
	// ProtocolFastPath is the protocol with its one-round fast path: the
	// acquire script does the compare-and-set of a guessed fence where it
	// sets K (the implementation: redlock's fenced acquire scripts).
	ProtocolFastPath = Variant{Name: "protocol+fast-path", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock, Guess: CASAtGrant}
	// FastPathNoCAS (e): the fast path without its compare: the acquire
	// script sets C := g where it sets K, and a granting majority returns g.
	FastPathNoCAS = Variant{Name: "(e) fast path without the CAS: acquire sets C := g", Grant: ReadAtGrant, WriteBack: CAS, Seed: SeedFromClock, Guess: SetAtGrant}
)

// Bounds bound the exploration. The state space within them is finite and
// explored completely (unless MaxDepth cuts it).
type Bounds struct {
	// Clients is the number of clients, each making one Acquire (2 or 3).
	Clients int
	// Retransmissions is how many times, in all, a request that has
	// already been delivered may be delivered again (a retransmitted or
	// duplicated request; the copy lands whenever it likes).
	Retransmissions int
	// Losses is how many times, in all, an instance may restart without
	// persistence (losing K and C) or have its counter evicted (losing C).
	Losses int
	// Ticks is how many times the global clock may advance on its own
	// (besides the jump a loss forces, see ActRestart).
	Ticks int
	// MaxDepth, if positive, stops the exploration at that many steps.
	MaxDepth int
	// Time, if Time.On, selects the timed mode (timed.go): per-instance
	// clocks, seeds and guesses against them, losses at any step. Ticks
	// is then unused: Time.Ticks bounds the ticks.
	Time Timing
}

// Client phases.
const (
	phaseIdle        uint8 = iota // has not called Acquire
	phaseGranting                 // acquire round sent, waiting for grants
	phaseWritingBack              // v computed, write-back round sent
	phaseReturned                 // Acquire returned fence v
)

// client is what one client knows: where its Acquire is, and its fence.
type client struct {
	phase uint8
	after uint8 // clients (bitmask) that had returned when this one started
	fence int8  // v, once computed; -1 before
	guess int8  // the fence guessed at ActStart (Variant.Guess); -1: none
}

// column is one instance and the messages between it and each client: the
// state is N such columns (plus the clients), so that permuting instances
// permutes columns (see canonical).
type column struct {
	holder  uint8 // client index+1 whose token is in K; 0: K absent
	counter int8  // C; -1: C absent

	// grantSent[c]: times client c's acquire script has run here.
	grantSent [MaxClients]uint8
	// grantReplies[c]: granted replies from here in flight to client c, as
	// a bitmask of the c_i values they carry.
	grantReplies [MaxClients]uint64
	// wbSent[c]: times client c's write-back script has run here.
	wbSent [MaxClients]uint8
	// wbReplied[c]: a reply 1 to client c's write-back is in flight.
	wbReplied [MaxClients]bool
	// grantApplied[c]: a granted reply that applied client c's guess is in
	// flight (Variant.Guess).
	grantApplied [MaxClients]bool

	// The timed mode's (timed.go):
	off  int8  // the instance's clock is the reference clock + off
	down uint8 // ticks before a restarted instance runs scripts again
}

// State is one global state of the model: the instances with their
// messages, the clients, the clock and the bookkeeping of the bounds. It is
// comparable and used as a map key.
type State struct {
	clock  int8 // the global clock, in abstract microseconds
	high   int8 // the highest value any counter has held or any client computed
	losses uint8
	ticks  uint8
	dups   uint8 // retransmissions so far
	// The timed mode's (timed.go); clock is then the reference clock.
	clocksSet bool  // ActClocks has fixed the instances' offsets
	burst     uint8 // fences computed since the last tick (Timing.Rate)
	quiet     uint8 // ticks since a counter last took a value, capped (Timing.Gap)
	col       [N]column
	cli       [MaxClients]client
}

// initial is the state before anything happens: no keys, no counters.
func initial() State {
	var s State
	s.high = -1
	for i := range s.col {
		s.col[i].counter = -1
	}
	for c := range s.cli {
		s.cli[c].fence = -1
		s.cli[c].guess = -1
	}
	return s
}

// ActionKind is the kind of a model step.
type ActionKind uint8

// The steps of the model. Each is one protocol line (see the doc) or one
// thing the environment does.
const (
	// ActStart: the client calls Acquire: it draws a token and sends the
	// acquire script to every instance (pipelined fan-out); with a fast
	// path, with its guess (Action.Value): any value from 0 to one above
	// the highest of the counters, the fences and the clock in the state,
	// which covers every guess the implementation makes (a fence it saw,
	// plus one, or its clock a little ahead; the scripts' bound on how far
	// ahead of the server's clock a guess may be is what makes the clock
	// assumption, which the model takes as given at a loss, hold).
	ActStart ActionKind = iota
	// ActDeliverGrant: the acquire script runs on an instance: SET K token
	// NX; if set, read C (seeding it from the clock if missing) and reply
	// {1, C}; else reply {0}.
	ActDeliverGrant
	// ActDecide: the client has received granted replies from a majority
	// (Action.Set, carrying c_i) and computes v = max(c_i) + 1; it sends the
	// write-back to the instances (with NoWriteBack it returns v at once).
	ActDecide
	// ActDeliverWriteBack: the write-back script runs on an instance: seed C
	// if missing; if C < v then C := v, reply 1; else reply 0.
	ActDeliverWriteBack
	// ActReturn: the client has received reply 1 from a majority of all N
	// instances (Action.Set); its Acquire returns v.
	ActReturn
	// ActExpire: K expires on an instance (also stands for a release or an
	// undo of the holder's key landing there).
	ActExpire
	// ActRestart: an instance restarts without persistence: K and C are
	// gone. With SeedFromClock the clock assumption holds: the clock moves
	// past every value issued so far.
	ActRestart
	// ActEvict: an instance evicts C (allkeys-* maxmemory): the counter is
	// lost as in a restart, K stays.
	ActEvict
	// ActTick: the clock advances.
	ActTick
	// ActReturnFast: the client has received, from a majority of all N
	// instances (Action.Set), granted replies that applied its guess; its
	// Acquire returns the guess without a write-back round.
	ActReturnFast
	// ActClocks (timed mode, the first step): the instances' clocks are
	// fixed at the reference clock plus an offset each (Action.Value
	// holds them, see clockOffsets).
	ActClocks
)

// Action is one step: a kind and what it concerns.
type Action struct {
	Kind     ActionKind
	Client   int8 // the client (0 is A), for the client's steps
	Instance int8 // the instance (0 is X), for steps on one instance
	// Value: ActDecide: the v computed; ActStart: the guess (fast path);
	// ActClocks: the instances' clock offsets (clockOffsets).
	Value int8
	// Set: ActDecide, ActReturn: the instances (bitmask) whose replies the
	// client received.
	Set uint8
}

// Model is one variant under bounds, ready to explore.
type Model struct {
	V Variant // the rules
	B Bounds  // the bounds of the exploration

	clientPerms [][MaxClients]int8 // the renamings of the clients (canonical.go)
}

// clientName and instName give the names traces use.
func clientName(c int) string { return string(rune('A' + c)) }
func instName(i int) string   { return string(rune('X' + i)) }

// actions appends the steps enabled in s, in a fixed order (determinism).
func (m *Model) actions(s *State, out []Action) []Action {
	timed := m.B.Time.On
	if timed && (!s.clocksSet || m.allReturned(s)) {
		return m.clockChoices(s, out)
	}
	for c := 0; c < m.B.Clients; c++ {
		cl := &s.cli[c]
		cc := int8(c)
		if cl.phase == phaseIdle {
			if timed {
				out = m.timedStarts(s, c, out)
				continue
			}
			if m.V.Guess == NoGuess {
				out = append(out, Action{Kind: ActStart, Client: cc})
				continue
			}
			top := int8(-1)
			for i := range s.col {
				top = max(top, s.col[i].counter)
			}
			for o := range s.cli {
				top = max(top, s.cli[o].fence)
			}
			top = max(top, s.clock) // a guess from the clock: clock + 1
			for g := int8(0); g <= top+1; g++ {
				out = append(out, Action{Kind: ActStart, Client: cc, Value: g})
			}
			continue
		}
		for i := 0; i < N; i++ {
			if m.deliverable(s, s.col[i].grantSent[c]) && s.col[i].down == 0 {
				out = append(out, Action{Kind: ActDeliverGrant, Client: cc, Instance: int8(i)})
			}
		}
		if cl.phase == phaseGranting {
			out = m.decisions(s, c, out)
			if set := instances(func(i int) bool { return s.col[i].grantApplied[c] }); bits.OnesCount8(set) >= Majority {
				out = append(out, Action{Kind: ActReturnFast, Client: cc, Set: set})
			}
		}
		if cl.phase >= phaseWritingBack && m.V.WriteBack != NoWriteBack {
			for i := 0; i < N; i++ {
				if m.deliverable(s, s.col[i].wbSent[c]) && s.col[i].down == 0 {
					out = append(out, Action{Kind: ActDeliverWriteBack, Client: cc, Instance: int8(i)})
				}
			}
		}
		if cl.phase == phaseWritingBack {
			if set := instances(func(i int) bool { return s.col[i].wbReplied[c] }); bits.OnesCount8(set) >= Majority {
				out = append(out, Action{Kind: ActReturn, Client: cc, Set: set})
			}
		}
	}
	for i := 0; i < N; i++ {
		if s.col[i].holder != 0 {
			out = append(out, Action{Kind: ActExpire, Instance: int8(i)})
		}
	}
	if int(s.losses) < m.B.Losses {
		for i := 0; i < N; i++ {
			out = append(out, Action{Kind: ActRestart, Instance: int8(i)})
		}
		for i := 0; i < N; i++ {
			if s.col[i].counter >= 0 && (!timed || s.quiet >= m.B.Time.Gap) {
				out = append(out, Action{Kind: ActEvict, Instance: int8(i)})
			}
		}
	}
	if timed && (m.B.Time.Ticks == 0 || s.ticks < m.B.Time.Ticks) || !timed && int(s.ticks) < m.B.Ticks {
		out = append(out, Action{Kind: ActTick})
	}
	return out
}

// instances returns the set (a bitmask) of the instances i for which
// has(i).
func instances(has func(i int) bool) uint8 {
	var set uint8
	for i := 0; i < N; i++ {
		if has(i) {
			set |= 1 << i
		}
	}
	return set
}

// deliverable says whether a request delivered sent times so far can be
// delivered (again).
func (m *Model) deliverable(s *State, sent uint8) bool {
	return sent == 0 || int(s.dups) < m.B.Retransmissions
}

// decisions appends client c's possible ActDecide steps: for every set of
// at least Majority instances with a granted reply in flight, and every
// choice of one reply per instance (a retransmission can leave two), the v
// it computes; one step per distinct v (the received set is only shown in
// traces).
func (m *Model) decisions(s *State, c int, out []Action) []Action {
	if m.B.Time.On && !m.rateAllows(s) {
		return out
	}
	var seen [2]uint64 // distinct v values already offered
	for set := uint8(1); set < 1<<N; set++ {
		if bits.OnesCount8(set) < Majority {
			continue
		}
		// Enumerate the max over one reply value per instance in set: the
		// possible maxima are the values v0 in some instance's replies
		// such that every other instance in set has a reply <= v0.
		ok := true
		for i := 0; i < N; i++ {
			if set&(1<<i) != 0 && s.col[i].grantReplies[c] == 0 {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for i := 0; i < N; i++ {
			if set&(1<<i) == 0 {
				continue
			}
			for r := s.col[i].grantReplies[c]; r != 0; r &= r - 1 {
				top := bits.TrailingZeros64(r)
				possible := true
				for j := 0; j < N; j++ {
					if j != i && set&(1<<j) != 0 && bits.TrailingZeros64(s.col[j].grantReplies[c]) > top {
						possible = false // j's smallest reply is above top
					}
				}
				if !possible {
					continue
				}
				v := top + 1
				if m.V.Grant == IncrAtGrant {
					v = top
				}
				if seen[v/64]&(1<<(v%64)) != 0 {
					continue
				}
				seen[v/64] |= 1 << (v % 64)
				out = append(out, Action{Kind: ActDecide, Client: int8(c), Value: int8(v), Set: set})
			}
		}
	}
	return out
}
