package soak

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// sampleKeys is how many of the lock keys left a result names.
const sampleKeys = 5

// Leftovers are the keys of a run found on its servers after it ended.
type Leftovers struct {
	// LockKeys are the lock keys left (on every server: a key left on
	// two of three Redlock masters counts twice), and any other key under
	// the run's prefix that is none of the kinds below.
	LockKeys int
	// NoExpiry is how many of LockKeys have no expiry in Redis (no PTTL)
	// and so stay until someone deletes them. (etcd's contender keys are
	// attached to leases; Sample says which.)
	NoExpiry int
	// Sample names the first few lock keys left, with their time to live.
	Sample []string
	// FenceCounters are fence counters (singleredis and redlock with
	// fence=true keep one per key, which expires an hour after its last
	// fence; docs/keys.md).
	FenceCounters int
	// QueueKeys are the fair wait's queue and registration keys.
	QueueKeys int
	// Epochs is how many servers hold Redlock's restart-safety epoch
	// (redlock.EpochKey, server-wide, outside any prefix).
	Epochs int
}

// add adds the counts of o to l and keeps the first sample keys.
func (l *Leftovers) add(o Leftovers) {
	l.LockKeys += o.LockKeys
	l.NoExpiry += o.NoExpiry
	l.FenceCounters += o.FenceCounters
	l.QueueKeys += o.QueueKeys
	l.Epochs += o.Epochs
	for _, s := range o.Sample {
		if len(l.Sample) < sampleKeys {
			l.Sample = append(l.Sample, s)
		}
	}
}

// scanRedis finds the keys of prefix on the server of c: the lock keys
// (prefix...), the keys kept in a lock key's hash slot ({prefix...}suffix),
// and Redlock's epoch.
func scanRedis(ctx context.Context, c *redis.Client, prefix string) (Leftovers, error) {
	var l Leftovers
	err := scanMatch(ctx, c, userservers.GlobEscape(prefix)+"*", func(key string) error {
		l.LockKeys++
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("PTTL %s: %w", key, err)
		}
		desc := fmt.Sprintf("%s on %s (expires in %v)", key, c.Options().Addr, ttl.Round(time.Millisecond))
		if ttl < 0 {
			l.NoExpiry++
			desc = fmt.Sprintf("%s on %s (no expiry)", key, c.Options().Addr)
		}
		if len(l.Sample) < sampleKeys {
			l.Sample = append(l.Sample, desc)
		}
		return nil
	})
	if err != nil {
		return l, err
	}
	err = scanMatch(ctx, c, "{"+userservers.GlobEscape(prefix)+"*", func(key string) error {
		switch {
		case strings.HasSuffix(key, "}"+singleredis.FenceSuffix), strings.HasSuffix(key, "}"+redlock.FenceSuffix):
			l.FenceCounters++
		case strings.HasSuffix(key, "}"+singleredis.QueueSuffix), strings.HasSuffix(key, "}"+singleredis.WaitersSuffix):
			l.QueueKeys++
		default:
			l.LockKeys++
			if len(l.Sample) < sampleKeys {
				l.Sample = append(l.Sample, key+" on "+c.Options().Addr+" (not a kind the soak knows)")
			}
		}
		return nil
	})
	if err != nil {
		return l, err
	}
	n, err := c.Exists(ctx, redlock.EpochKey).Result()
	if err != nil {
		return l, fmt.Errorf("EXISTS %s on %s: %w", redlock.EpochKey, c.Options().Addr, err)
	}
	l.Epochs = int(n)
	return l, nil
}

// scanMatch calls each for every key matching pattern.
func scanMatch(ctx context.Context, c *redis.Client, pattern string, each func(string) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return fmt.Errorf("SCAN MATCH %s on %s: %w", pattern, c.Options().Addr, err)
		}
		for _, k := range keys {
			if err := each(k); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// scanEtcd finds the keys under prefix in etcd: every one is a
// contender's key (holder or waiter), attached to a lease.
func scanEtcd(ctx context.Context, c *clientv3.Client, prefix string) (Leftovers, error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(sampleKeys))
	if err != nil {
		return Leftovers{}, fmt.Errorf("etcd get prefix %q: %w", prefix, err)
	}
	l := Leftovers{LockKeys: int(resp.Count)}
	for _, kv := range resp.Kvs {
		desc := fmt.Sprintf("%s (lease %x)", kv.Key, kv.Lease)
		if kv.Lease == 0 {
			desc = string(kv.Key) + " (no lease)"
		}
		l.Sample = append(l.Sample, desc)
	}
	return l, nil
}
