package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
)

func init() {
	openers[LegacySetNX] = func(_ context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		unit, err := legacysetnx.ParseUnit(c.Unit)
		if err != nil {
			return nil, err
		}
		rcs, closer, err := redisClients(c, cl)
		if err != nil {
			return nil, err
		}
		if len(rcs) != 1 {
			return nil, invalid("legacysetnx needs exactly one Redis client, got %d", len(rcs))
		}
		lk, err := legacysetnx.New(rcs[0], legacysetnx.Options{Prefix: c.Prefix, Unit: unit, TTL: time.Duration(c.TTL),
			ServerTime: c.ServerTime, SetRedisExpiry: c.RedisExpiry, Closer: closer})
		if err != nil && closer != nil {
			closer.Close()
		}
		return lk, err
	}
}

// validateLegacySetNX checks the legacysetnx parts of c: the unit, which is
// required and parsed by legacysetnx.ParseUnit alone, and the ttl= against
// the unit's range (legacysetnx.Unit.TTLRange). A migrate Config's ttl=
// applies to its legacy= Locker too, so it is checked against that unit.
func validateLegacySetNX(c Config) error {
	var unitOf *Config
	switch {
	case c.Backend == LegacySetNX:
		unitOf = &c
	case c.Backend == Migrate && c.Legacy != nil && c.Legacy.Backend == LegacySetNX:
		unitOf = c.Legacy
	default:
		return nil
	}
	unit, err := legacysetnx.ParseUnit(unitOf.Unit)
	if err != nil {
		if c.Backend == Migrate {
			return fmt.Errorf("backend: migrate legacy=: %w", err)
		}
		return fmt.Errorf("backend: %w", err)
	}
	if c.TTL != 0 {
		if err := unit.ValidateTTL(time.Duration(c.TTL)); err != nil {
			return fmt.Errorf("backend: ttl=%v: %w", time.Duration(c.TTL), err)
		}
	}
	return nil
}
