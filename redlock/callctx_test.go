package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestCallCtxReuse: the pooled call context ends at its deadline or with
// its parent, and a reuse starts clean: events of an earlier use do not
// reach it.
func TestCallCtxReuse(t *testing.T) {
	var c callCtx
	waitDone := func(what string) {
		t.Helper()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Done not closed", what)
		}
	}
	open := func(what string) {
		t.Helper()
		select {
		case <-c.Done():
			t.Fatalf("%s: Done closed (err %v)", what, c.Err())
		default:
		}
		if err := c.Err(); err != nil {
			t.Fatalf("%s: Err = %v", what, err)
		}
	}

	c.init(context.WithValue(context.Background(), ctxKey{}, "v"), time.Now().Add(20*time.Millisecond))
	if c.Value(ctxKey{}) != "v" {
		t.Error("Value does not reach the parent")
	}
	waitDone("deadline")
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Errorf("after the deadline Err = %v", c.Err())
	}
	c.end()

	c.init(context.Background(), time.Now().Add(time.Hour))
	open("reuse after a deadline")
	c.end()

	parent, cancel := context.WithCancel(context.Background())
	c.init(parent, time.Now().Add(time.Hour))
	open("cancellable parent")
	cancel()
	waitDone("parent cancelled")
	if !errors.Is(c.Err(), context.Canceled) {
		t.Errorf("after the parent's cancel Err = %v", c.Err())
	}
	c.end()

	// A parent cancelled after its use ended does not reach the next use.
	parent, cancel = context.WithCancel(context.Background())
	c.init(parent, time.Now().Add(time.Hour))
	c.Done()
	c.end()
	c.init(context.Background(), time.Now().Add(time.Hour))
	cancel() // end stopped the AfterFunc: nothing runs
	open("next use after the old parent's cancel")
	c.end()

	// A parent with an earlier deadline sets the deadline.
	pd, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.init(pd, time.Now().Add(time.Hour))
	if d, _ := c.Deadline(); d.After(time.Now().Add(time.Minute)) {
		t.Errorf("Deadline %v is past the parent's", d)
	}
	c.end()
}
