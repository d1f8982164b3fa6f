package singleredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/registry"
)

// TestFairCloseOwnedClient: a fair_wait Locker opened from a URL, whose
// subscription is open, closes within docs/errors.md's second with its
// server paused (SIGSTOP), on every client: the subscription and the
// client the Locker owns close at once, so rueidis's goodbye on the
// subscription's connection (a PING it gives a second) ends with the
// client's connections. A Release whose outcome is unknown goes on in the
// background meanwhile, as in the promise matrix's Close cell.
func TestFairCloseOwnedClient(t *testing.T) {
	for _, client := range []string{"goredis", "redigo", "rueidis"} {
		t.Run(client, func(t *testing.T) {
			srv := testserver.RedisT(t, testserver.RedisOptions{})
			raw := redistest.GoRedisClient(t, srv.Addr())
			ctx := context.Background()
			open := func(query string) lockswap.Locker {
				lk, err := registry.OpenURL(ctx, "singleredis://"+srv.Addr()+"?client="+client+query)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { lk.Close() })
				return lk
			}
			lk, other := open("&fair_wait=true"), open("")
			held, err := other.TryAcquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			// A wait opens the subscription.
			wctx, cancel := context.WithCancel(ctx)
			out := acquireAsync(wctx, lk, "k")
			waitFor(t, 5*time.Second, "registered", func() bool { return queued(raw, "k") == 1 })
			waitFor(t, 5*time.Second, "the waiter waiting for its wake-up", waitingForWakeUp)
			cancel()
			if r := <-out; !errors.Is(r.err, lockswap.ErrHeld) {
				t.Fatalf("Acquire of a held key: %v, want ErrHeld", r.err)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l, err := lk.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Resume)
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			l.Release(rctx)
			cancel()
			probe := conformance.StartLagProbe()
			begin := time.Now()
			lk.Close()
			took := time.Since(begin)
			probe.Stop()
			if allowed := time.Second + probe.Extra(); took > allowed {
				t.Errorf("Close with the server paused took %v, want at most 1 s (allowed %v with scheduling lags up to %v)", took, allowed, probe.Max())
			}
		})
	}
}
