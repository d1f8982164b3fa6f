package attempt

// Pending returns how many of d's slots have a timer still to run.
func Pending(d *Deadlines) int { return d.pending() }
