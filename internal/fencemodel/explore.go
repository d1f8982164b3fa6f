package fencemodel

import (
	"fmt"
	"strings"
)

// Result is the outcome of an exploration.
type Result struct {
	// States is the number of distinct states reached.
	States int
	// Transitions is the number of steps taken (edges explored).
	Transitions int
	// Depth is the largest number of steps from the start to a state
	// explored (the length of the longest shortest path).
	Depth int
	// Complete is true when every state within the bounds was explored
	// (MaxDepth did not cut the search and no violation stopped it).
	Complete bool
	// Violation is the first property broken, nil if none.
	Violation *Violation
	// Trace is the steps leading to Violation from the initial state, one
	// line each; the search is breadth-first, so it is a shortest one.
	Trace []string
}

// step is how the explorer reached a state: from which state, by what.
type step struct {
	parent int32
	action Action
}

// Explore runs a breadth-first search of every state reachable within the
// bounds, checking both properties on every step; it stops at the first
// violation and returns it with a shortest trace. It is deterministic.
func (m *Model) Explore() Result {
	if m.B.Clients < 1 || m.B.Clients > MaxClients {
		panic(fmt.Sprintf("fencemodel: %d clients, want 1 to %d", m.B.Clients, MaxClients))
	}
	m.clientPerms = clientPerms(m.B.Clients)
	start, startKey, _ := m.canonical(initial())
	seen := map[stateKey]int32{startKey: 0}
	steps := []step{{parent: -1}}
	type entry struct {
		s  State
		id int32
	}
	frontier := []entry{{start, 0}}
	var res Result
	var acts []Action
	for depth := 0; len(frontier) > 0; depth++ {
		res.Depth = depth
		if m.B.MaxDepth > 0 && depth == m.B.MaxDepth {
			res.States = len(seen)
			return res
		}
		var next []entry
		for _, e := range frontier {
			acts = m.actions(&e.s, acts[:0])
			for _, a := range acts {
				res.Transitions++
				t := e.s
				_, v := m.apply(&t, a, false)
				t, k, _ := m.canonical(t)
				if v != nil {
					res.States = len(seen)
					res.Violation = v
					res.Trace = m.trace(steps, e.id, a)
					return res
				}
				if _, ok := seen[k]; ok {
					continue
				}
				if len(steps) == 1<<31-1 {
					panic("fencemodel: too many states")
				}
				id := int32(len(steps))
				seen[k] = id
				steps = append(steps, step{parent: e.id, action: a})
				next = append(next, entry{t, id})
			}
		}
		frontier = next
	}
	res.States = len(seen)
	res.Complete = true
	return res
}

// trace replays the path to state id, then last, describing each step.
func (m *Model) trace(steps []step, id int32, last Action) []string {
	var path []Action
	for ; id > 0; id = steps[id].parent {
		path = append(path, steps[id].action)
	}
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	path = append(path, last)
	// Replay on the real (not renamed) states, so that names stay put:
	// each stored action is on the canonical form of its state, mapped
	// back through the renaming that made it.
	s := initial()
	_, _, p := m.canonical(s)
	lines := make([]string, 0, len(path)+1)
	for k, a := range path {
		desc, v := m.apply(&s, m.inverse(p, a), true)
		if m.B.Time.On {
			// The stored steps' values are those of the normalized
			// states (normalizeTimed translates them): replay on those,
			// and say where the values move.
			if shift, capped := m.normalizeTimed(&s); capped >= 0 {
				desc += fmt.Sprintf(" [R lowered from %d to %d: far above every value]", capped, s.clock+shift)
			} else if shift > 0 {
				desc += fmt.Sprintf(" [every value and R lowered by %d: only differences count]", shift)
			}
		}
		_, _, p = m.canonical(s)
		lines = append(lines, fmt.Sprintf("%2d. %s", k+1, desc))
		if v != nil {
			lines = append(lines, fmt.Sprintf("    => %s violated: %s", strings.ToUpper(v.Property), v.Detail))
		}
	}
	return lines
}
