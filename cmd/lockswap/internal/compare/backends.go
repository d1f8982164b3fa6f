package compare

import (
	"context"
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// kits lists the compared backends in column order: the order of the
// columns of `lockswap compare`, of bench's rows and of the declared table
// in docs/guarantees.md. A new backend is one entry here.
var kits = []kit{
	redisBackend{
		name: "singleredis", n: 1, g: singleredis.Guarantees(true), ttl: 500 * time.Millisecond,
		build: func(c []redisclient.Client, _ time.Duration, prefix string) (lockswap.Locker, error) {
			return singleredis.New(c[0], singleredis.Options{Fence: true, Prefix: prefix})
		},
	}.kit(),
	redisBackend{
		name: "redlock", n: 5, g: redlock.Guarantees(5, true), ttl: 500 * time.Millisecond,
		build: func(c []redisclient.Client, _ time.Duration, prefix string) (lockswap.Locker, error) {
			return redlock.New(c, redlock.Options{RestartSafety: true, MaxTTL: redlockMaxTTL, Prefix: prefix})
		},
		seed: seedRedlockEpoch, serverWideKey: redlock.EpochKey,
	}.kit(),
	redisBackend{
		name: "legacysetnx", n: 1, g: legacysetnx.Guarantees(), ttl: time.Second, readsClock: true,
		build: func(c []redisclient.Client, skew time.Duration, prefix string) (lockswap.Locker, error) {
			return legacysetnx.New(c[0], legacysetnx.Options{Prefix: prefix, Unit: legacysetnx.Seconds, Clock: func() time.Time { return time.Now().Add(skew) }})
		},
	}.kit(),
	etcdKit,
}

// redlockMaxTTL is the longest TTL the redlock column uses (the restart
// scenario holds its lock for 30 s).
const redlockMaxTTL = 30 * time.Second

// seedRedlockEpoch marks a fresh server as up for an hour, as in a
// long-running deployment: with restart safety on, Redlock would otherwise
// treat a server it has never seen as just restarted and wait MaxTTL
// before counting it. A restart without persistence erases the mark, which
// is what the restart scenario measures.
func seedRedlockEpoch(ctx context.Context, c redisclient.Client) error {
	now, err := c.Time(ctx)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, "SET", redlock.EpochKey, fmt.Sprintf("%d.0.compare", now.Add(-time.Hour).Unix()))
	return err
}
