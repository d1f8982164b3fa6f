package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
	"github.com/redis/rueidis/rueidislock"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	lsrueidis "github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// rueidisOption is the client the rueidis floor and lockswap's rueidis
// adapter use, as client=rueidis URLs open it: one server, no client-side
// caching, no retries, every request through the connection's pipeline
// writer (AlwaysPipelining, which lsrueidis.NewClient sets in any case).
func rueidisOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableRetry: true, DisableCache: true, AlwaysPipelining: true}
}

// openRueidis makes a rueidis client of addr the way the docs recommend,
// with lsrueidis.NewClient, and returns it with its adapter. As with
// rueidis.NewClient, a client whose server did not answer comes with the
// dial's error (it dials again on use): only a nil client is a failure.
func openRueidis(addr string) (rueidis.Client, redisclient.Client, error) {
	c, a, err := lsrueidis.NewClient(rueidisOption(addr))
	if c == nil {
		return nil, nil, fmt.Errorf("rueidis %s: %w", addr, err)
	}
	return c, a, nil
}

// newRueidis is openRueidis for one test or benchmark, which closes the
// client at its end.
func newRueidis(tb testing.TB, addr string) (rueidis.Client, redisclient.Client) {
	c, a, err := openRueidis(addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c, a
}

// rueidisFloorCycle is the raw rueidis floor: SET NX PX + EVALSHA
// compare-and-delete, a fixed token, polling a held key with retry.
func rueidisFloorCycle(c rueidis.Client, retry lockswap.RetryStrategy) cycleFunc {
	token := workerToken()
	ms := ttl.Milliseconds()
	return func(ctx context.Context, key string, hold func() error) error {
		for {
			err := c.Do(ctx, c.B().Set().Key(key).Value(token).Nx().PxMilliseconds(ms).Build()).Error()
			if err == nil {
				break
			}
			if !rueidis.IsRedisNil(err) {
				return err
			}
			if err := sleepRetry(ctx, retry); err != nil {
				return err
			}
		}
		herr := callHold(hold)
		if err := c.Do(ctx, c.B().Evalsha().Sha1(releaseSHA).Numkeys(1).Key(key).Arg(token).Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		return herr
	}
}

// newRueidisLock makes a rueidislock Locker on one server (KeyMajority 1:
// one key per lock), with its own client (it needs client-side caching).
func newRueidisLock(tb testing.TB, addr string) rueidislock.Locker {
	lk, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true},
		KeyMajority:  1,
		KeyValidity:  ttl,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(lk.Close)
	return lk
}

// rueidisLockWait bounds one rueidislock acquisition: a waiter whose
// wake-up is lost would otherwise wait for ever (seen with separate
// Lockers: a run hung for minutes), and the benchmark fails instead.
const rueidisLockWait = 10 * time.Second

func rueidisLockCycle(lk rueidislock.Locker) cycleFunc {
	return func(ctx context.Context, key string, hold func() error) error {
		wctx, wcancel := context.WithTimeout(ctx, rueidisLockWait)
		defer wcancel()
		_, cancel, err := lk.WithContext(wctx, key)
		if err != nil {
			return fmt.Errorf("rueidislock: not acquired within %v: %w", rueidisLockWait, err)
		}
		herr := callHold(hold)
		cancel()
		return herr
	}
}

// redis1RueidisImpls: the rueidis floor, singleredis on the adapter
// lsrueidis.NewClient returned with the floor's client (the recommended
// way), singleredis on lsrueidis.NewNamed of the same client (the old
// way: the adapter cannot tell the client pipelines always, and pays a
// hand-over to a worker goroutine per command), the floor on a client built without
// AlwaysPipelining (rueidis's default), and rueidislock.
func redis1RueidisImpls(b *testing.B, s *servers) []impl {
	c, retry := s.rueidis[0], singleredis.DefaultRetry
	lk := newSingleredis(b, s.rueidisAdapters[0])
	named := newSingleredis(b, lsrueidis.NewNamed(c, s.redisAddrs[0]))
	rl := newRueidisLock(b, s.redisAddrs[0])
	return []impl{
		{"floor-rueidis", func(*testing.B) cycleFunc { return rueidisFloorCycle(c, retry) }},
		{"lockswap-rueidis", func(*testing.B) cycleFunc { return lockswapCycle(lk) }},
		{"lockswap-rueidis-named", func(*testing.B) cycleFunc { return lockswapCycle(named) }},
		{"floor-rueidis-default", func(*testing.B) cycleFunc { return rueidisFloorCycle(s.rueidisDefault, retry) }},
		{"rueidislock", func(*testing.B) cycleFunc { return rueidisLockCycle(rl) }},
	}
}

// redlockRueidisImpls: redlock on the first n servers through the rueidis
// adapters lsrueidis.NewClient returned with the shared clients, which
// group the concurrent callers' commands to each instance
// (redisclient.Grouper), the same without grouping (each command by
// itself, rueidis's own pipelining only): the A/B of the group commit, and
// redsync on the same clients (its rueidis pool, through rueidiscompat):
// issue 31's Redlock base on rueidis.
func redlockRueidisImpls(b *testing.B, s *servers, n int) []impl {
	cs := make([]redisclient.Client, n)
	plain := make([]redisclient.Client, n)
	pools := make([]rsredis.Pool, n)
	for i := range n {
		cs[i] = s.rueidisAdapters[i]
		plain[i] = ungrouped{cs[i]}
		pools[i] = rsrueidis.NewPool(rueidiscompat.NewAdapter(s.rueidis[i]))
	}
	rs := redsync.New(pools...)
	lk, err := redlock.New(cs, redlock.Options{})
	if err != nil {
		b.Fatal(err)
	}
	lkPlain, err := redlock.New(plain, redlock.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close(); lkPlain.Close() })
	return []impl{
		{"lockswap-rueidis", func(*testing.B) cycleFunc { return lockswapCycle(lk) }},
		{"lockswap-rueidis-ungrouped", func(*testing.B) cycleFunc { return lockswapCycle(lkPlain) }},
		{"redsync-rueidis", func(*testing.B) cycleFunc { return redsyncCycle(rs, redlock.DefaultRetry) }},
	}
}

// ungrouped is a client without its Grouper (redlock then sends each
// command by itself).
type ungrouped struct{ redisclient.Client }
