package compare

import (
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

func init() {
	kits = append(kits,
		redisBackend{
			name: "singleredis", n: 1, g: singleredis.Guarantees(true), ttl: 500 * time.Millisecond,
			build: func(c []redisclient.Client, _ time.Duration) (lockswap.Locker, error) {
				return singleredis.New(c[0], singleredis.Options{Fence: true})
			},
		}.kit(),
		redisBackend{
			name: "legacysetnx", n: 1, g: legacysetnx.Guarantees(), ttl: time.Second, readsClock: true,
			build: func(c []redisclient.Client, skew time.Duration) (lockswap.Locker, error) {
				return legacysetnx.New(c[0], legacysetnx.Options{Clock: func() time.Time { return time.Now().Add(skew) }})
			},
		}.kit(),
	)
}
