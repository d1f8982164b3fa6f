package redlock_test

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/background"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redlock"
)

// silentServer accepts connections and reads what they send, never
// answering: a Redis instance that hangs. It stops at the end of the
// test.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				c.Close()
			} else {
				conns = append(conns, c)
				wg.Add(1)
				go func() {
					defer wg.Done()
					io.Copy(io.Discard, c)
				}()
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// lockerGoroutines returns the stacks of the goroutines running the
// library's code (a Locker's workers, background work, waits), not the
// clients' or the test's.
func lockerGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, pkg := range []string{"lockswap/redlock.", "lockswap/driver.", "lockswap/internal/background.", "lockswap/internal/localq."} {
			if strings.Contains(g, "github.com/lockswap/"+pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// TestCloseBoundedWithPendingReleases: with releases still going on in the
// background against an instance that accepts and never answers, Close
// waits for them once (background.CloseWait, shared by the kit's work and
// redlock's rounds), then stops them: it returns within that wait plus
// the rest of a round already sent, and no goroutine of the Locker
// outlives it.
func TestCloseBoundedWithPendingReleases(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			addrs, _ := realN(t, 2)
			addrs = append(addrs, silentServer(t))
			before := len(lockerGoroutines())
			lk := newLocker(t, addrs, c.New, redlock.Options{})
			ctx := ctxT(t)
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := lk.Acquire(ctx, fmt.Sprint("k", i), lockswap.WithTTL(10*time.Second))
					if err == nil {
						err = l.Release(ctx)
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("with 2 of 3 instances answering: %v", err)
				}
			}
			if running, _ := redlock.BackgroundReleases(lk); running == 0 {
				t.Fatal("no release goes on in the background against the silent instance: the test shows nothing")
			}
			start := time.Now()
			if err := lk.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			took := time.Since(start)
			// CloseWait, then the rest of a round already sent (rounds here
			// are 250 ms, 500 ms, 1 s), with slack for -race on a loaded
			// machine. Two waits in sequence and a round each would pass
			// it only just; a wait for the releases' own end
			// (CleanupTimeout) would not.
			if bound := background.CloseWait + 1500*time.Millisecond; took > bound {
				t.Errorf("Close took %v with releases pending against a silent instance, want within %v", took, bound)
			}
			t.Logf("Close took %v", took)
			if running, _ := redlock.BackgroundReleases(lk); running != 0 {
				t.Errorf("%d background releases still running after Close", running)
			}
			// A goroutine that has just signalled its end may still be
			// returning: wait for that, bounded.
			deadline := time.Now().Add(2 * time.Second)
			left := lockerGoroutines()
			for len(left) > before && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				left = lockerGoroutines()
			}
			if len(left) > before {
				t.Errorf("%d goroutines of the Locker outlive Close (%d before it was made):\n%s", len(left), before, strings.Join(left, "\n\n"))
			}
		})
	}
}
