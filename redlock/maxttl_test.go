package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// issue28MaxTTL is the max_ttl of issue 28: close to the largest
// time.Duration, so that MaxTTL plus its drift allowance overflowed and
// the restart-safety quarantine ended before it began.
const issue28MaxTTL = "2562047h"

// TestMaxTTLLimit: a MaxTTL above lockswap.MaxTTL (365 days) is refused
// with ErrInvalid naming the field and the limit, in Options and in the
// URL (and so in the JSON configuration, which goes through it), and
// nothing is written; the limit itself is accepted.
func TestMaxTTLLimit(t *testing.T) {
	huge, err := time.ParseDuration(issue28MaxTTL)
	if err != nil {
		t.Fatal(err)
	}
	limit := lockswap.MaxTTL.String()
	mr := miniredis.RunT(t)
	cs := []redisclient.Client{redistest.GoRedis(t, mr.Addr())}
	for _, rs := range []bool{false, true} {
		for _, m := range []time.Duration{huge, lockswap.MaxTTL + time.Millisecond} {
			lk, err := redlock.New(cs, redlock.Options{RestartSafety: rs, MaxTTL: m})
			if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "MaxTTL") || !strings.Contains(err.Error(), limit) {
				if lk != nil {
					lk.Close()
				}
				t.Errorf("New with RestartSafety=%v, MaxTTL %v: %v; want ErrInvalid naming MaxTTL and the limit %s", rs, m, err, limit)
			}
		}
	}
	lk, err := redlock.New(cs, redlock.Options{RestartSafety: true, MaxTTL: lockswap.MaxTTL})
	if err != nil {
		t.Fatalf("New with MaxTTL = lockswap.MaxTTL: %v", err)
	}
	lk.Close()
	if len(mr.Keys()) != 0 {
		t.Errorf("rejected configurations wrote keys: %v", mr.Keys())
	}

	for _, q := range []string{"restart_safety=true&max_ttl=" + issue28MaxTTL, "max_ttl=" + issue28MaxTTL, "restart_safety=true&max_ttl=8760h1ms"} {
		raw := "redlock://a:1,b:1,c:1?" + q
		_, err := backend.ParseURL(raw)
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "max_ttl") || !strings.Contains(err.Error(), limit) {
			t.Errorf("ParseURL(%q): %v; want ErrInvalid naming max_ttl and the limit %s", raw, err, limit)
		}
	}
	c := backend.Config{Backend: "redlock", Addrs: []string{"a:1", "b:1", "c:1"}, RestartSafety: true, MaxTTL: backend.Duration(huge)}
	if err := c.Validate(); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "max_ttl") {
		t.Errorf("Config.Validate with max_ttl %v: %v; want ErrInvalid naming max_ttl", huge, err)
	}
	if _, err := backend.ParseURL("redlock://a:1,b:1,c:1?restart_safety=true&max_ttl=8760h"); err != nil {
		t.Errorf("max_ttl=8760h (the limit): %v", err)
	}
}

// TestMaxTTLOverflowRestart is issue 28's scenario: with restart safety,
// A holds a lock; 2 of the 3 masters restart without their data; B,
// another client, must not get the lock while A's is valid. With
// max_ttl=2562047h the quarantine overflowed and B got it; now that URL
// is refused when parsed, and the largest max_ttl accepted keeps B out
// (as a small one always did). The epochs are seeded 400 days old, older
// than any accepted max_ttl, so that A need not wait out a first use.
func TestMaxTTLOverflowRestart(t *testing.T) {
	for _, maxTTL := range []string{"1h", lockswap.MaxTTL.String(), issue28MaxTTL} {
		t.Run("max_ttl="+maxTTL, func(t *testing.T) {
			addrs, srvs := realN(t, 3)
			ctx := ctxT(t)
			seed := fmt.Sprintf("%d.0.seeded-by-test", time.Now().Add(-400*24*time.Hour).Unix())
			for _, rc := range rawClients(t, addrs) {
				if err := rc.Set(ctx, redlock.EpochKey, seed, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			raw := "redlock://" + strings.Join(addrs, ",") + "?restart_safety=true&max_ttl=" + maxTTL
			open := func() lockswap.Locker {
				lk, err := backend.OpenURL(ctx, raw)
				if err != nil {
					return nil
				}
				t.Cleanup(func() { lk.Close() })
				return lk
			}
			a := open()
			if a == nil {
				_, err := backend.OpenURL(ctx, raw)
				if maxTTL != issue28MaxTTL || !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "max_ttl") {
					t.Fatalf("OpenURL: %v", err)
				}
				t.Logf("refused when parsed: %v", err)
				return
			}
			if maxTTL == issue28MaxTTL {
				t.Errorf("OpenURL accepted max_ttl=%s; want ErrInvalid (the quarantine overflows)", maxTTL)
			}
			retry := lockswap.WithRetry(lockswap.ConstantRetry(20 * time.Millisecond))
			la, err := a.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second), retry)
			if err != nil {
				t.Fatalf("A: %v", err)
			}
			defer la.Release(ctx)
			for _, s := range srvs[:2] { // forget A's key and the epoch
				if err := s.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			b := open()
			bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			lb, err := b.Acquire(bctx, "k", lockswap.WithTTL(10*time.Second), retry)
			if err == nil {
				lb.Release(ctx)
				t.Fatalf("B acquired while A holds the lock until %v (2 of 3 masters restarted empty): the quarantine did not hold", la.Deadline())
			}
			if !errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(err.Error(), "restarted") {
				t.Errorf("B: %v; want ErrUnavailable naming the restarted masters", err)
			}
		})
	}
}
