package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCallCtxPastDeadline: a call whose deadline has already passed when
// its Done channel is first asked for (a loaded machine, a tiny instance
// timeout) is cancelled at once without a timer, and ending it does not
// touch the timer it never made. This panicked (nil timer) in compare's
// majority-down scenario under -race.
func TestCallCtxPastDeadline(t *testing.T) {
	var c callCtx
	c.init(context.Background(), time.Now().Add(-time.Millisecond))
	select {
	case <-c.Done():
	default:
		t.Fatal("Done of a call past its deadline is not closed")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("Err = %v, want DeadlineExceeded", c.Err())
	}
	c.end() // must not panic
	// The next use arms a timer as usual.
	c.init(context.Background(), time.Now().Add(time.Hour))
	select {
	case <-c.Done():
		t.Fatal("a fresh use is already done")
	default:
	}
	if c.timer == nil {
		t.Error("a use with a future deadline armed no timer")
	}
	c.end()
}
