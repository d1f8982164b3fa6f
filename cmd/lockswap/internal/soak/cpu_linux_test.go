package soak

import (
	"syscall"
	"testing"
	"time"
)

// TestProcessCPUSelf: this process's CPU time from /proc agrees with
// getrusage's, after some work.
func TestProcessCPUSelf(t *testing.T) {
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// Work until getrusage counts 100 ms more (a busy machine gives this
	// goroutine less than its wall time).
	start := rusage()
	for end := time.Now().Add(10 * time.Second); rusage() < start+100*time.Millisecond; {
		if time.Now().After(end) {
			t.Fatal("100 ms of CPU not used within 10 s")
		}
	}
	got, ok := processCPU("self")
	want := rusage()
	// /proc counts whole ticks (10 ms), read just before getrusage.
	if !ok || got > want+clockTick || got < want-5*clockTick {
		t.Errorf("processCPU(self) = %v, %v; getrusage says %v", got, ok, want)
	}
}
