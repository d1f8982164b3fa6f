package backend

import (
	"context"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
)

func init() {
	openers[LegacySetNX] = func(_ context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		unit := legacysetnx.Seconds
		if c.Unit != "" {
			u, err := legacysetnx.ParseUnit(c.Unit)
			if err != nil {
				return nil, err
			}
			unit = u
		}
		rcs, closer, err := redisClients(c, cl)
		if err != nil {
			return nil, err
		}
		if len(rcs) != 1 {
			return nil, invalid("legacysetnx needs exactly one Redis client, got %d", len(rcs))
		}
		lk, err := legacysetnx.New(rcs[0], legacysetnx.Options{Prefix: c.Prefix, Unit: unit,
			ServerTime: c.ServerTime, SetRedisExpiry: c.RedisExpiry, Closer: closer})
		if err != nil && closer != nil {
			closer.Close()
		}
		return lk, err
	}
}
