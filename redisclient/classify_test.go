package redisclient_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
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

// TestClassifyHeld: on a key the caller held, another Redis type means the
// lock is lost; any other error is classified as Classify does.
func TestClassifyHeld(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		cl := c.New(t, srv.Addr())
		ctx := context.Background()
		if _, err := cl.Do(ctx, "RPUSH", "held-"+c.Name, "x"); err != nil {
			t.Fatal(err)
		}
		_, err := cl.Run(ctx, redisscript.CompareAndDelete, []string{"held-" + c.Name}, "token")
		if got := redisclient.ClassifyHeld(cl, err); !errors.Is(got, lockswap.ErrLost) || errors.Is(got, lockswap.ErrInvalid) {
			t.Errorf("%s: ClassifyHeld(%v) = %v, want ErrLost", c.Name, err, got)
		}
		if got := redisclient.Classify(cl, err); !errors.Is(got, lockswap.ErrInvalid) {
			t.Errorf("%s: Classify(%v) = %v, want ErrInvalid (a WRONGTYPE reply is permanent)", c.Name, err, got)
		}
		down := c.New(t, "127.0.0.1:1") // nothing listens on port 1
		_, err = down.Run(ctx, redisscript.CompareAndDelete, []string{"k"}, "token")
		if got := redisclient.ClassifyHeld(down, err); !errors.Is(got, lockswap.ErrUnavailable) || errors.Is(got, lockswap.ErrLost) {
			t.Errorf("%s: ClassifyHeld(%v) = %v, want ErrUnavailable", c.Name, err, got)
		}
		if got := redisclient.ClassifyHeld(cl, nil); got != nil {
			t.Errorf("%s: ClassifyHeld(nil) = %v", c.Name, got)
		}
	}
}
