package redisclient_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
)

// TestMaybeApplied: a request that could not connect never ran, so there
// is nothing to undo; one sent to a server that never answers may have
// run, so there is.
func TestMaybeApplied(t *testing.T) {
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	for _, c := range redistest.Clients {
		for _, tc := range []struct {
			name, addr string
			timeout    time.Duration
			want       bool
		}{
			// Nothing listens on port 1. The timeout leaves go-redis time
			// for its retries, so that the dial error is what it returns.
			{"closed port", "127.0.0.1:1", 10 * time.Second, false},
			{"silent server", ln.Addr().String(), 200 * time.Millisecond, true},
		} {
			cl := c.New(t, tc.addr)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			_, err := cl.SetNXPX(ctx, "k", "token", time.Second)
			cancel()
			if err == nil {
				t.Fatalf("%s, %s: SET succeeded", c.Name, tc.name)
			}
			classified := redisclient.Classify(cl, err)
			if !redisclient.Uncertain(classified) {
				t.Errorf("%s, %s: Uncertain(%v) = false, want true: no answer came", c.Name, tc.name, classified)
			}
			if got := redisclient.MaybeApplied(classified); got != tc.want {
				t.Errorf("%s, %s: MaybeApplied(%v) = %v, want %v", c.Name, tc.name, classified, got, tc.want)
			}
		}
	}
}
