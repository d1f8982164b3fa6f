package compare

import (
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

func init() {
	kits = append(kits, redisBackend{
		name: "singleredis", n: 1, g: singleredis.Guarantees(true), ttl: 500 * time.Millisecond,
		build: func(c []redisclient.Client, _ time.Duration) (lockswap.Locker, error) {
			return singleredis.New(c[0], singleredis.Options{Fence: true})
		},
	}.kit())
}
