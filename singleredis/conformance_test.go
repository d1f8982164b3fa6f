package singleredis_test

import (
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
	return conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker {
			lk, err := singleredis.New(newClient(t, addr), singleredis.Options{Prefix: "test:", Fence: fence})
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		TTL:         300 * time.Millisecond,
		AdvanceTime: advance,
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := singleredis.New(newClient(t, addr), singleredis.Options{Prefix: "test:", Fence: fence, TTL: ttl})
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
