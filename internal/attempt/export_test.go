package attempt

import "time"

// Pending returns how many of d's slots have a timer still to run.
func Pending(d *Deadlines) int { return d.pending() }

// SlotOf returns the channel of the slot end falls in, and why it closed.
func SlotOf(d *Deadlines, end time.Time) (<-chan struct{}, func() error) {
	s := d.slotOf(end)
	return s.ch, s.ended
}

// FiredLate stops the timer of the slot end falls in as if it had fired
// and its fire had yet to take d's lock, and returns that fire.
func FiredLate(d *Deadlines, end time.Time) func() {
	s := d.slotOf(end)
	s.t.Stop()
	return func() { d.fire(s) }
}

// SlotBase is the origin of the slots.
var SlotBase = slotBase

// WallSince is wallSince.
var WallSince = wallSince
