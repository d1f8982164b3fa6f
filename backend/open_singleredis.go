package backend

import (
	"context"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/singleredis"
)

func init() {
	openers[SingleRedis] = func(_ context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		rcs, closer, err := redisClients(c, cl)
		if err != nil {
			return nil, err
		}
		if len(rcs) != 1 {
			return nil, invalid("singleredis needs exactly one Redis client, got %d", len(rcs))
		}
		lk, err := singleredis.New(rcs[0], singleredis.Options{Prefix: c.Prefix, Fence: c.Fence, TTL: time.Duration(c.TTL), Closer: closer})
		if err != nil && closer != nil {
			closer.Close()
		}
		return lk, err
	}
}
