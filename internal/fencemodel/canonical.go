package fencemodel

import (
	"bytes"
	"encoding/binary"
)

// Symmetry reduction. Instances are interchangeable (the protocol treats
// them alike), and so are clients once their "started after" relation is
// renamed with them: two states that differ only by such a renaming have
// the same futures, up to the renaming, and break the properties together.
// The explorer stores one representative per class, the canonical form,
// which cuts the state space by up to N!·Clients!.

// perm is a renaming: new index of each old client and instance.
type perm struct {
	cli  [MaxClients]int8
	inst [N]int8
}

// colKeyLen is the length of a column's encoding.
const colKeyLen = 4 + MaxClients*(1+8+1+1+1)

// key encodes a column as bytes; columns sort by it.
func (c *column) key() [colKeyLen]byte {
	var k [colKeyLen]byte
	k[0], k[1], k[2], k[3] = c.holder, byte(c.counter), byte(c.off), c.down
	p := 4
	for x := 0; x < MaxClients; x++ {
		k[p] = c.grantSent[x]
		binary.BigEndian.PutUint64(k[p+1:], c.grantReplies[x])
		k[p+9] = c.wbSent[x]
		if c.wbReplied[x] {
			k[p+10] = 1
		}
		if c.grantApplied[x] {
			k[p+11] = 1
		}
		p += 12
	}
	return k
}

// stateKeyLen is the length of a state's encoding.
const stateKeyLen = 8 + MaxClients*4 + N*colKeyLen

// stateKey is a state encoded as bytes: the explorer's set of seen states
// holds these, and the canonical form is the renaming with the least one.
type stateKey [stateKeyLen]byte

// key encodes a state.
func (s *State) key() stateKey {
	var cols [N][colKeyLen]byte
	for i := range s.col {
		cols[i] = s.col[i].key()
	}
	return s.keyWith(&cols)
}

// keyWith encodes a state whose columns' keys are already known.
func (s *State) keyWith(cols *[N][colKeyLen]byte) stateKey {
	var k stateKey
	k[0], k[1], k[2], k[3], k[4] = byte(s.clock), byte(s.high), s.losses, s.ticks, s.dups
	if s.clocksSet {
		k[5] = 1
	}
	k[6], k[7] = s.burst, s.quiet
	p := 8
	for _, c := range s.cli {
		k[p], k[p+1], k[p+2], k[p+3] = c.phase, c.after, byte(c.fence), byte(c.guess)
		p += 4
	}
	for i := range cols {
		p += copy(k[p:], cols[i][:])
	}
	return k
}

// clientPerms lists the renamings of the first n clients.
func clientPerms(n int) [][MaxClients]int8 {
	var out [][MaxClients]int8
	var p [MaxClients]int8
	for c := range p {
		p[c] = int8(c)
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			out = append(out, p)
			return
		}
		for j := k; j < n; j++ {
			p[k], p[j] = p[j], p[k]
			rec(k + 1)
			p[k], p[j] = p[j], p[k]
		}
	}
	rec(0)
	return out
}

// renameClients returns s with client c renamed to p[c].
func renameClients(s *State, p [MaxClients]int8) State {
	t := *s
	for c := range s.cli {
		nc := p[c]
		t.cli[nc] = s.cli[c]
		var after uint8
		for o := range s.cli {
			if s.cli[c].after&(1<<o) != 0 {
				after |= 1 << p[o]
			}
		}
		t.cli[nc].after = after
	}
	for i := range s.col {
		from, to := &s.col[i], &t.col[i]
		if from.holder != 0 {
			to.holder = uint8(p[from.holder-1] + 1)
		}
		for c := range s.cli {
			nc := p[c]
			to.grantSent[nc] = from.grantSent[c]
			to.grantReplies[nc] = from.grantReplies[c]
			to.wbSent[nc] = from.wbSent[c]
			to.wbReplied[nc] = from.wbReplied[c]
			to.grantApplied[nc] = from.grantApplied[c]
		}
	}
	return t
}

// sortColumns orders the columns of s by key and returns, for each old
// index, its new one, and the state's key.
func sortColumns(s *State) ([N]int8, stateKey) {
	var keys [N][colKeyLen]byte
	var order [N]int // order[new] = old
	for i := range s.col {
		keys[i] = s.col[i].key()
		order[i] = i
	}
	for a := 1; a < N; a++ { // insertion sort, N is 3
		for b := a; b > 0 && bytes.Compare(keys[order[b]][:], keys[order[b-1]][:]) < 0; b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	cols := s.col
	var to [N]int8
	var sorted [N][colKeyLen]byte
	for n, old := range order {
		s.col[n] = cols[old]
		sorted[n] = keys[old]
		to[old] = int8(n)
	}
	return to, s.keyWith(&sorted)
}

// normalize forgets what can no longer matter: the clock and the record of
// issued values once no loss is left to come and every counter exists (or
// when seeds ignore the clock), so that states differing only there merge.
func (m *Model) normalize(s *State) {
	if m.B.Time.On {
		m.normalizeTimed(s)
		return
	}
	lossesLeft := int(s.losses) < m.B.Losses
	if !lossesLeft || m.V.Seed == SeedZero {
		s.high = -1
	}
	allSeeded := true
	for i := range s.col {
		if s.col[i].counter < 0 {
			allSeeded = false
		}
	}
	if m.V.Seed == SeedZero || (!lossesLeft && allSeeded) {
		s.clock, s.ticks = 0, 0
	}
	if int(s.dups) == m.B.Retransmissions {
		// No request can be delivered again: how often each was
		// delivered no longer matters, only whether it was.
		for i := range s.col {
			for c := range s.cli {
				s.col[i].grantSent[c] = min(s.col[i].grantSent[c], 1)
				s.col[i].wbSent[c] = min(s.col[i].wbSent[c], 1)
			}
		}
	}
}

// canonical returns the representative of s's class and the renaming that
// takes s to it.
func (m *Model) canonical(s State) (State, stateKey, perm) {
	m.normalize(&s)
	var best State
	var bestKey stateKey
	var bestPerm perm
	for k, cp := range m.clientPerms {
		t := renameClients(&s, cp)
		ip, key := sortColumns(&t)
		if k == 0 || bytes.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey, bestPerm = t, key, perm{cli: cp, inst: ip}
		}
	}
	return best, bestKey, bestPerm
}

// inverse maps an action on a canonical state back to the state it
// represents, given the renaming p that took that state to the canonical one.
func (m *Model) inverse(p perm, a Action) Action {
	for c, nc := range p.cli {
		if nc == a.Client {
			a.Client = int8(c)
			break
		}
	}
	if a.Kind == ActDeliverGrant || a.Kind == ActDeliverWriteBack || a.Kind == ActExpire || a.Kind == ActRestart || a.Kind == ActEvict {
		for i, ni := range p.inst {
			if ni == a.Instance {
				a.Instance = int8(i)
				break
			}
		}
	}
	if a.Kind == ActClocks {
		newOff := m.clockOffsets(a.Value)
		var off [N]int8
		for i, ni := range p.inst {
			off[i] = newOff[ni]
		}
		a.Value = m.encodeOffsets(off)
	}
	var set uint8
	for i, ni := range p.inst {
		if a.Set&(1<<ni) != 0 {
			set |= 1 << i
		}
	}
	a.Set = set
	return a
}
