package legacysetnx_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// fakeClock is a wall clock shared by every Locker of a test: real time plus
// an offset that tests move forward, so that timestamps expire without
// waiting. Each Locker may add its own skew on top.
type fakeClock struct{ offset atomic.Int64 }

func (c *fakeClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *fakeClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// skewed returns c's time plus skew (a client whose clock runs ahead).
func (c *fakeClock) skewed(skew time.Duration) func() time.Time {
	return func() time.Time { return c.Now().Add(skew) }
}

type config struct {
	name string
	opts legacysetnx.Options
	ttl  time.Duration
}

// TestConformance runs the suite for legacysetnx × {go-redis, redigo} ×
// {miniredis, redis-server} × option sets. Client-clock configurations
// travel in time with a shared fake clock (and miniredis FastForward for the
// Redis expiry); server-time configurations run on redis-server in real
// time, since miniredis's TIME is either real or frozen.
func TestConformance(t *testing.T) {
	mini := []config{
		{"seconds", legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."}, time.Second},
		{"millis-expiry", legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Milliseconds, SetRedisExpiry: true}, 300 * time.Millisecond},
	}
	onServer := []config{
		{"seconds", legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "lock."}, time.Second},
		{"millis-servertime-expiry", legacysetnx.Options{Unit: legacysetnx.Milliseconds, ServerTime: true, SetRedisExpiry: true}, 300 * time.Millisecond},
	}
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			for _, cfg := range mini {
				t.Run("miniredis/"+cfg.name, func(t *testing.T) {
					t.Parallel()
					mr := miniredis.RunT(t)
					conformance.Run(t, harness(mr.Addr(), c.New, cfg, mr))
				})
			}
			for _, cfg := range onServer {
				t.Run("redis-server/"+cfg.name, func(t *testing.T) {
					t.Parallel()
					srv := testserver.RedisT(t, testserver.RedisOptions{})
					conformance.Run(t, harness(srv.Addr(), c.New, cfg, nil))
				})
			}
		})
	}
}

func harness(addr string, newClient redistest.NewClient, cfg config, mr *miniredis.Miniredis) conformance.Harness {
	clock := &fakeClock{}
	h := conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker {
			o := cfg.opts
			o.Clock = clock.Now
			lk, err := legacysetnx.New(newClient(t, addr), o)
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		TTL: cfg.ttl,
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			o := cfg.opts
			o.Clock, o.TTL = clock.Now, ttl
			lk, err := legacysetnx.New(newClient(t, addr), o)
			if err != nil {
				return nil, err
			}
			return lk, nil
		},
	}
	if !cfg.opts.ServerTime {
		h.AdvanceTime = func(d time.Duration) {
			clock.Advance(d)
			if mr != nil {
				mr.FastForward(d)
			}
		}
	}
	return h
}
