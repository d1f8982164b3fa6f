package lockswap_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

func TestRetryStrategies(t *testing.T) {
	if _, ok := lockswap.NoRetry().NextDelay(1); ok {
		t.Error("NoRetry must give up after the first attempt")
	}
	if d, ok := lockswap.ConstantRetry(7 * time.Millisecond).NextDelay(100); !ok || d != 7*time.Millisecond {
		t.Errorf("ConstantRetry(7ms).NextDelay(100) = %v, %v", d, ok)
	}
	lim := lockswap.LimitedRetry(time.Millisecond, 3)
	for a := 1; a <= 3; a++ {
		_, ok := lim.NextDelay(a)
		if want := a < 3; ok != want {
			t.Errorf("LimitedRetry(…, 3).NextDelay(%d) ok = %v, want %v", a, ok, want)
		}
	}
	j := lockswap.JitterRetry(10*time.Millisecond, 20*time.Millisecond)
	b := lockswap.BackoffRetry(time.Millisecond, 50*time.Millisecond)
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		d, _ := j.NextDelay(1)
		if d < 10*time.Millisecond || d >= 20*time.Millisecond {
			t.Fatalf("JitterRetry delay %v outside [10ms, 20ms)", d)
		}
		seen[d] = true
		for attempt, limit := range map[int]time.Duration{1: time.Millisecond, 3: 4 * time.Millisecond, 10: 50 * time.Millisecond, 100: 50 * time.Millisecond} {
			if d, ok := b.NextDelay(attempt); !ok || d < 0 || d > limit {
				t.Fatalf("BackoffRetry attempt %d: delay %v, want within [0, %v]", attempt, d, limit)
			}
		}
	}
	if len(seen) < 50 {
		t.Errorf("JitterRetry gave only %d distinct delays in 200 draws: no jitter", len(seen))
	}
}

// TestResolveMaxOutage: the default outage limit is DefaultMaxOutage,
// and WithMaxOutage changes it.
func TestResolveMaxOutage(t *testing.T) {
	o, err := lockswap.Options{}.Resolve()
	if err != nil || o.MaxOutage != lockswap.DefaultMaxOutage {
		t.Fatalf("default MaxOutage = %v (%v), want %v", o.MaxOutage, err, lockswap.DefaultMaxOutage)
	}
	o, _ = lockswap.Options{}.Resolve(lockswap.WithMaxOutage(-1))
	if o.MaxOutage != -1 {
		t.Fatalf("WithMaxOutage(-1) gave %v", o.MaxOutage)
	}
	o, _ = lockswap.Options{}.Resolve(lockswap.WithMaxOutage(0))
	if o.MaxOutage != lockswap.DefaultMaxOutage {
		t.Fatalf("WithMaxOutage(0) gave %v, want the default %v", o.MaxOutage, lockswap.DefaultMaxOutage)
	}
}
