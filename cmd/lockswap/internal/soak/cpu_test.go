package soak

import "testing"

// TestParseStat: utime and stime are fields 14 and 15 of /proc/<pid>/stat,
// counted after the command name, which may hold spaces and ")".
func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 3 0 12345 0 0"
	if got, ok := parseStat(line); !ok || got != 287*clockTick {
		t.Errorf("parseStat = %v, %v; want %v (250 + 37 ticks)", got, ok, 287*clockTick)
	}
	for _, bad := range []string{"", "4242 (a", "4242 (a) S 1 2", "4242 (a) S 1 4242 4242 0 -1 4194560 100 0 0 0 x 37"} {
		if got, ok := parseStat(bad); ok {
			t.Errorf("parseStat(%q) = %v, true; want false", bad, got)
		}
	}
}
