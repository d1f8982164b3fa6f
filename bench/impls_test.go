package bench

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/etcdlease"
	"github.com/lockswap/lockswap/redisclient"
	lsgoredis "github.com/lockswap/lockswap/redisclient/goredis"
	lsredigo "github.com/lockswap/lockswap/redisclient/redigo"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

var workerSeq atomic.Int64

// workerToken is a fixed token per floor worker: the floors pay for no
// token generation at all, which makes them the strictest baseline.
func workerToken() string { return fmt.Sprintf("floor-%026d", workerSeq.Add(1)) }

// sleepRetry sleeps the delay r gives for a retry (the floors poll with
// the same policy as the lockswap backend of their group).
func sleepRetry(ctx context.Context, r lockswap.RetryStrategy) error {
	d, _ := r.NextDelay(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func callHold(hold func() error) error {
	if hold == nil {
		return nil
	}
	return hold()
}

// lockswapCycle is one Acquire, hold, Release on any lockswap Locker.
func lockswapCycle(lk lockswap.Locker) cycleFunc {
	opt := lockswap.WithTTL(ttl)
	return func(ctx context.Context, key string, hold func() error) error {
		l, err := lk.Acquire(ctx, key, opt)
		if err != nil {
			return err
		}
		herr := callHold(hold)
		if err := l.Release(ctx); err != nil {
			return err
		}
		return herr
	}
}

// bsmRetry adapts a lockswap retry policy to bsm/redislock's.
type bsmRetry struct{ r lockswap.RetryStrategy }

func (b bsmRetry) NextBackoff() time.Duration { d, _ := b.r.NextDelay(1); return d }

// redsyncDelay adapts a lockswap retry policy to redsync's.
func redsyncDelay(r lockswap.RetryStrategy) redsync.DelayFunc {
	return func(tries int) time.Duration { d, _ := r.NextDelay(tries); return d }
}

// redsyncCycle locks with redsync, retrying with retry (adapted) or, when
// retry is nil, with redsync's default delay (50–250 ms, random); tries are
// unbounded either way, so that a long wait is measured, not an error.
func redsyncCycle(rs *redsync.Redsync, retry lockswap.RetryStrategy) cycleFunc {
	opts := []redsync.Option{
		redsync.WithExpiry(ttl),
		redsync.WithTries(math.MaxInt32),
	}
	if retry != nil {
		opts = append(opts, redsync.WithRetryDelayFunc(redsyncDelay(retry)))
	}
	return func(ctx context.Context, key string, hold func() error) error {
		m := rs.NewMutex(key, opts...)
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		herr := callHold(hold)
		if ok, err := m.UnlockContext(ctx); err != nil || !ok {
			return fmt.Errorf("redsync unlock: %v %v", ok, err)
		}
		return herr
	}
}

// newSingleredis makes a singleredis Locker on c, closed at b's end.
func newSingleredis(b *testing.B, c redisclient.Client) *singleredis.Locker {
	lk, err := singleredis.New(c, singleredis.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	return lk
}

// goredisFloorCycle is the raw go-redis floor on gr: SET NX PX + EVALSHA
// compare-and-delete, a fixed token, polling a held key with retry.
func goredisFloorCycle(gr *goredis.Client, retry lockswap.RetryStrategy) cycleFunc {
	token := workerToken()
	return func(ctx context.Context, key string, hold func() error) error {
		for {
			ok, err := gr.SetNX(ctx, key, token, ttl).Result()
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if err := sleepRetry(ctx, retry); err != nil {
				return err
			}
		}
		herr := callHold(hold)
		if err := gr.EvalSha(ctx, releaseSHA, []string{key}, token).Err(); err != nil {
			return err
		}
		return herr
	}
}

// redigoFloorCycle is the raw redigo floor on pool: the same commands, a
// pooled connection per command.
func redigoFloorCycle(pool *redigo.Pool, retry lockswap.RetryStrategy) cycleFunc {
	token := workerToken()
	ms := ttl.Milliseconds()
	do := func(ctx context.Context, cmd string, args ...any) (any, error) {
		c, err := pool.GetContext(ctx)
		if err != nil {
			return nil, err
		}
		v, err := redigo.DoContext(c, ctx, cmd, args...)
		c.Close()
		return v, err
	}
	return func(ctx context.Context, key string, hold func() error) error {
		for {
			v, err := do(ctx, "SET", key, token, "NX", "PX", ms)
			if err != nil {
				return err
			}
			if v != nil {
				break
			}
			if err := sleepRetry(ctx, retry); err != nil {
				return err
			}
		}
		herr := callHold(hold)
		if _, err := do(ctx, "EVALSHA", releaseSHA, 1, key, token); err != nil {
			return err
		}
		return herr
	}
}

// redis1Impls: one redis-server (the first), through go-redis, redigo and
// rueidis. The -default impls are go-redis as it comes (without
// ContextTimeoutEnabled): its floor, and singleredis on it, whose adapter
// then pays a hand-over to a worker goroutine per command to keep the
// deadlines.
func redis1Impls(b *testing.B, s *servers) []impl {
	gr, grDef, pool := s.goredis[0], s.goredisDefault, s.redigo[0]
	retry := singleredis.DefaultRetry
	grLocker := newSingleredis(b, lsgoredis.New(gr))
	grDefLocker := newSingleredis(b, lsgoredis.New(grDef))
	rgLocker := newSingleredis(b, lsredigo.New(pool))
	bsm := redislock.New(gr)
	rsGR := redsync.New(rsgoredis.NewPool(gr))
	rsRG := redsync.New(rsredigo.NewPool(pool))
	impls := []impl{
		{"floor-goredis", func(*testing.B) cycleFunc { return goredisFloorCycle(gr, retry) }},
		{"lockswap-goredis", func(*testing.B) cycleFunc { return lockswapCycle(grLocker) }},
		{"redislock-goredis", func(*testing.B) cycleFunc {
			opt := &redislock.Options{RetryStrategy: bsmRetry{retry}}
			return func(ctx context.Context, key string, hold func() error) error {
				l, err := bsm.Obtain(ctx, key, ttl, opt)
				if err != nil {
					return err
				}
				herr := callHold(hold)
				if err := l.Release(ctx); err != nil {
					return err
				}
				return herr
			}
		}},
		{"redsync-goredis", func(*testing.B) cycleFunc { return redsyncCycle(rsGR, retry) }},
		{"floor-goredis-default", func(*testing.B) cycleFunc { return goredisFloorCycle(grDef, retry) }},
		{"lockswap-goredis-default", func(*testing.B) cycleFunc { return lockswapCycle(grDefLocker) }},
		{"floor-redigo", func(*testing.B) cycleFunc { return redigoFloorCycle(pool, retry) }},
		{"lockswap-redigo", func(*testing.B) cycleFunc { return lockswapCycle(rgLocker) }},
		{"redsync-redigo", func(*testing.B) cycleFunc { return redsyncCycle(rsRG, retry) }},
	}
	return append(impls, redis1RueidisImpls(b, s)...)
}

// redlockImpls: the first n redis-servers as independent masters.
func redlockImpls(b *testing.B, s *servers, n int) []impl {
	retry := redlock.DefaultRetry
	grs := make([]redisclient.Client, n)
	rgs := make([]redisclient.Client, n)
	rsGRPools := make([]rsredis.Pool, n)
	rsRGPools := make([]rsredis.Pool, n)
	for i := range n {
		grs[i] = lsgoredis.New(s.goredis[i])
		rgs[i] = lsredigo.NewNamed(s.redigo[i], s.redisAddrs[i])
		rsGRPools[i] = rsgoredis.NewPool(s.goredis[i])
		rsRGPools[i] = rsredigo.NewPool(s.redigo[i])
	}
	grLocker, err := redlock.New(grs, redlock.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rgLocker, err := redlock.New(rgs, redlock.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// With Options.Fence (issue 16: the cost of fencing, against the same
	// Locker unfenced). Each group has a prefix of its own: fenced Lockers
	// of one prefix over sets of masters more than one apart (redlock3's
	// and redlock5's share three) are refused (docs/redlock.md, "Changing
	// the masters").
	fenced := redlock.Options{Fence: true, Prefix: fmt.Sprintf("redlock%d:", n)}
	grFenced, err := redlock.New(grs, fenced)
	if err != nil {
		b.Fatal(err)
	}
	rgFenced, err := redlock.New(rgs, fenced)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { grLocker.Close(); rgLocker.Close(); grFenced.Close(); rgFenced.Close() })
	rsGR, rsRG := redsync.New(rsGRPools...), redsync.New(rsRGPools...)
	addrs := s.redisAddrs[:n]
	return append([]impl{
		{"floor-redigo", func(b *testing.B) cycleFunc { return redlockFloor(b, addrs, retry) }},
		{"lockswap-goredis", func(*testing.B) cycleFunc { return lockswapCycle(grLocker) }},
		{"redsync-goredis", func(*testing.B) cycleFunc { return redsyncCycle(rsGR, retry) }},
		{"lockswap-redigo", func(*testing.B) cycleFunc { return lockswapCycle(rgLocker) }},
		{"redsync-redigo", func(*testing.B) cycleFunc { return redsyncCycle(rsRG, retry) }},
		{"redsync-redigo-defaultretry", func(*testing.B) cycleFunc { return redsyncCycle(rsRG, nil) }},
		{"lockswap-fenced-goredis", func(*testing.B) cycleFunc { return lockswapCycle(grFenced) }},
		{"lockswap-fenced-redigo", func(*testing.B) cycleFunc { return lockswapCycle(rgFenced) }},
	}, redlockRueidisImpls(b, s, n)...)
}

// redlockFloor is the least work the Redlock protocol costs: one goroutine
// pipelines SET NX PX to all N instances on dedicated connections, reads
// the N replies, and releases (EVALSHA compare-and-delete) the same way;
// a failed attempt is undone on every instance and retried after the same
// delay as lockswap's redlock. It keeps no validity bookkeeping.
func redlockFloor(b *testing.B, addrs []string, retry lockswap.RetryStrategy) cycleFunc {
	conns := make([]redigo.Conn, len(addrs))
	for i, a := range addrs {
		c, err := redigo.Dial("tcp", a)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	quorum := len(addrs)/2 + 1
	ms := ttl.Milliseconds()
	token := workerToken()
	release := func(key string) error {
		for _, c := range conns {
			c.Send("EVALSHA", releaseSHA, 1, key, token)
			c.Flush()
		}
		var first error
		for _, c := range conns {
			if _, err := c.Receive(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return func(ctx context.Context, key string, hold func() error) error {
		for {
			for _, c := range conns {
				c.Send("SET", key, token, "NX", "PX", ms)
				c.Flush()
			}
			ok := 0
			var ferr error
			for _, c := range conns {
				v, err := c.Receive()
				if err != nil {
					ferr = err
				} else if v != nil {
					ok++
				}
			}
			if ferr != nil {
				return ferr
			}
			if ok >= quorum {
				break
			}
			if ok > 0 {
				if err := release(key); err != nil {
					return err
				}
			}
			if err := sleepRetry(ctx, retry); err != nil {
				return err
			}
		}
		herr := callHold(hold)
		if err := release(key); err != nil {
			return err
		}
		return herr
	}
}

// etcdImpls: lockswap's etcdlease and etcd's own concurrency.Mutex, on the
// same client. Each Mutex goroutine has its own session, created before
// the timer and reused for every cycle.
func etcdImpls(b *testing.B, s *servers) []impl {
	c := s.etcdClient
	lk, err := etcdlease.New(c, etcdlease.Options{Prefix: "bench/lockswap/", ClusterSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lk.Close() })
	return []impl{
		{"lockswap", func(*testing.B) cycleFunc { return lockswapCycle(lk) }},
		{"mutex", func(b *testing.B) cycleFunc {
			sess, err := concurrency.NewSession(c, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { sess.Close() })
			return func(ctx context.Context, key string, hold func() error) error {
				m := concurrency.NewMutex(sess, "bench/mutex/"+key)
				if err := m.Lock(ctx); err != nil {
					return err
				}
				herr := callHold(hold)
				if err := m.Unlock(ctx); err != nil {
					return err
				}
				return herr
			}
		}},
	}
}
