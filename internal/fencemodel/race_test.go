//go:build race

package fencemodel

// raceEnabled: under the race detector (which the single-goroutine explorer
// does not need, and which slows it about fifty times) the default run
// uses the small bounds.
const raceEnabled = true
