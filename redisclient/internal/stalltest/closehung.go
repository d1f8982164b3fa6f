package stalltest

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/registry"
)

// CloseBound is how long closing a client may take, whatever its servers
// do: the bound the library promises for a Locker's Close.
const CloseBound = time.Second

// Dialer opens a client as a Redis URL's client= option does.
type Dialer = registry.RedisDialer

// RunCloseHung checks that a client dial opens (one the Locker owns)
// closes within CloseBound when its server hangs, a listener that accepts
// and never answers or a SIGSTOPped redis-server, with nothing in flight
// (after a command that timed out) and with callers in flight; and that
// no goroutine of the client's library (its import path, library) runs
// once Close has returned and the callers have returned.
func RunCloseHung(t *testing.T, dial Dialer, library string) {
	for _, srv := range []struct {
		name string
		// start returns the address of a server that will hang, and
		// hang, which makes it hang.
		start func(t *testing.T) (addr string, hang func())
	}{
		{"listener", func(t *testing.T) (string, func()) { return Hung(t), func() {} }},
		{"sigstop", func(t *testing.T) (string, func()) {
			r := testserver.RedisT(t, testserver.RedisOptions{})
			t.Cleanup(r.Resume)
			return r.Addr(), func() {
				if err := r.Pause(); err != nil {
					t.Skip(err)
				}
			}
		}},
	} {
		for _, inflight := range []int{0, 8} {
			name := srv.name + "/idle"
			if inflight > 0 {
				name = srv.name + "/in-flight"
			}
			t.Run(name, func(t *testing.T) {
				addr, hang := srv.start(t)
				closeHung(t, dial, library, addr, hang, inflight)
			})
		}
	}
}

func closeHung(t *testing.T, dial Dialer, library, addr string, hang func(), inflight int) {
	c, closer, err := dial(context.Background(), registry.RedisServer{Addr: addr, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			closer.Close()
		}
	})
	ctx := context.Background()
	// Connections made while the server still answers (a listener never
	// does: this command times out).
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	c.SetNXPX(wctx, "warm", "v", time.Minute)
	wcancel()
	hang()
	// A command that times out on the hung server.
	tctx, tcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, _, err := c.Get(tctx, "warm"); err == nil {
		t.Error("GET on a hung server succeeded")
	}
	tcancel()
	const callerTimeout = 10 * time.Second
	var started atomic.Int32
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, callerTimeout)
			defer cancel()
			started.Add(1)
			c.Get(cctx, "warm") // fails: the server hangs, then the client closes
		})
	}
	for deadline := time.Now().Add(5 * time.Second); int(started.Load()) < inflight; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the callers never started")
		}
	}
	start := time.Now()
	err = closer.Close()
	took := time.Since(start)
	closed = true
	if err != nil {
		t.Errorf("Close: %v", err)
	}
	if took > CloseBound {
		t.Errorf("Close with the server hung and %d callers in flight took %v, want at most %v", inflight, took, CloseBound)
	}
	t.Logf("Close took %v", took)
	// A closed client fails what is in flight, and its goroutines end:
	// those that were closing down when Close returned (rueidis does not
	// wait for its connections' goroutines) within the same bound, none
	// waiting on the hung server.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(CloseBound):
		t.Fatalf("callers in flight had not returned %v after Close:\n%s", CloseBound, strings.Join(Goroutines(library), "\n\n"))
	}
	for deadline := time.Now().Add(CloseBound); ; time.Sleep(time.Millisecond) {
		left := Goroutines(library)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of %s still run %v after Close returned:\n%s", len(left), library, CloseBound, strings.Join(left, "\n\n"))
		}
	}
}

// Goroutines returns the stacks of the goroutines with a frame of a
// function whose name contains substr.
func Goroutines(substr string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, substr) {
			out = append(out, g)
		}
	}
	return out
}
