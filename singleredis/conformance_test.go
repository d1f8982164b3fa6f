package singleredis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

func harness(addr string, newClient redistest.NewClient, fence bool, advance func(time.Duration)) conformance.Harness {
	return harnessOpts(addr, newClient, singleredis.Options{Prefix: "test:", Fence: fence}, 300*time.Millisecond, advance)
}

func harnessOpts(addr string, newClient redistest.NewClient, opts singleredis.Options, ttl time.Duration, advance func(time.Duration)) conformance.Harness {
	return conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker {
			lk, err := singleredis.New(newClient(t, addr), opts)
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		TTL:         ttl,
		AdvanceTime: advance,
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			o := opts
			o.TTL = ttl
			lk, err := singleredis.New(newClient(t, addr), o)
			if err != nil {
				return nil, err
			}
			return lk, nil
		},
	}
}

// TestConformance runs the suite for singleredis × {go-redis, redigo} ×
// {miniredis, redis-server} × {plain, fenced}.
func TestConformance(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			for _, fence := range []bool{false, true} {
				name := "plain"
				if fence {
					name = "fenced"
				}
				t.Run(name, func(t *testing.T) {
					t.Run("miniredis", func(t *testing.T) {
						mr := miniredis.RunT(t)
						conformance.Run(t, harness(mr.Addr(), c.New, fence, mr.FastForward))
					})
					t.Run("redis-server", func(t *testing.T) {
						srv := testserver.RedisT(t, testserver.RedisOptions{})
						conformance.Run(t, harness(srv.Addr(), c.New, fence, nil))
					})
				})
			}
		})
	}
}

// TestConformanceFairWait runs the suite for singleredis with FairWait on
// × {go-redis, redigo} × {plain, fenced} on redis-server.
func TestConformanceFairWait(t *testing.T) {
	for _, c := range fairClients {
		for _, fence := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fence=%v", c.Name, fence), func(t *testing.T) {
				srv := testserver.RedisT(t, testserver.RedisOptions{})
				// A TTL of 600 ms: the suite extends at 60% of it, which a
				// loaded machine running three clients' suites at once
				// missed by a few ms at 300 ms.
				conformance.Run(t, harnessOpts(srv.Addr(), c.New, singleredis.Options{Prefix: "test:", Fence: fence, FairWait: true}, 600*time.Millisecond, nil))
			})
		}
	}
}
