package history

import "sync"

// Register is the resource the workload's lock protects: one integer per
// key, in this process, with nothing of its own to stop two holders from
// interleaving their reads and writes. With fences on, it behaves as a
// fenced resource should: each request carries the holder's fence, and a
// request whose fence is below the highest the key has seen is rejected
// (the highest is raised by every request accepted, reads included).
type Register struct {
	fenced bool
	mu     sync.Mutex
	keys   map[string]*cell
}

type cell struct {
	value int64
	fence uint64
}

// NewRegister returns an empty Register (every key holds 0) that checks
// fences when fenced is true.
func NewRegister(fenced bool) *Register {
	return &Register{fenced: fenced, keys: map[string]*cell{}}
}

// Fenced reports whether g checks fences.
func (g *Register) Fenced() bool { return g.fenced }

// Read returns key's value; false when g checks fences and fence is below
// the highest seen for key.
func (g *Register) Read(key string, fence uint64) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.cell(key)
	if !g.admit(c, fence) {
		return 0, false
	}
	return c.value, true
}

// Write sets key to v; false (and nothing written) when g checks fences
// and fence is below the highest seen for key.
func (g *Register) Write(key string, v int64, fence uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.cell(key)
	if !g.admit(c, fence) {
		return false
	}
	c.value = v
	return true
}

// Value returns key's value, for checks.
func (g *Register) Value(key string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cell(key).value
}

func (g *Register) cell(key string) *cell {
	c := g.keys[key]
	if c == nil {
		c = &cell{}
		g.keys[key] = c
	}
	return c
}

// admit applies the fence rule to a request on c: with fences off every
// request passes.
func (g *Register) admit(c *cell, fence uint64) bool {
	if !g.fenced {
		return true
	}
	if fence < c.fence {
		return false
	}
	c.fence = fence
	return true
}
