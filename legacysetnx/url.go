package legacysetnx

import (
	"fmt"
	"io"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	legacysetnx://[user:password@]host:port[/db]?unit=s&prefix=lock.&ttl=10s&server_time=true&redis_expiry=true&log_keys=true&client=goredis&dial_timeout=5s
//
// legacysetnxs:// is the same over TLS. unit= is required and takes what
// ParseUnit takes; ttl= must be in the unit's Unit.TTLRange.
func init() {
	registry.Register(registry.RedisScheme("legacysetnx", parseURL, "unit", "server_time", "redis_expiry"))
}

// parseURL checks this backend's parameters; registry checked the others.
func parseURL(u *registry.URL, r registry.Redis) (registry.RedisOpener, error) {
	o, err := urlOptions(u, r)
	if err != nil {
		return nil, err
	}
	return func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
		o := o
		o.Closer = closer
		return New(rcs[0], o)
	}, nil
}

// urlOptions returns the Options a URL sets: one field per parameter
// (TestURLOptions checks that every field a URL can set has one).
func urlOptions(u *registry.URL, r registry.Redis) (Options, error) {
	if err := r.One(); err != nil {
		return Options{}, err
	}
	o := Options{Prefix: r.Prefix, TTL: r.TTL, Logger: r.Logger, LogKeys: r.LogKeys}
	var err error
	if o.Unit, err = ParseUnit(u.Query.Get("unit")); err != nil {
		return Options{}, err
	}
	if o.TTL != 0 {
		if err := o.Unit.ValidateTTL(o.TTL); err != nil {
			return Options{}, fmt.Errorf("ttl=%v: %w", o.TTL, err)
		}
	}
	if o.ServerTime, err = u.Bool("server_time"); err != nil {
		return Options{}, err
	}
	if o.SetRedisExpiry, err = u.Bool("redis_expiry"); err != nil {
		return Options{}, err
	}
	return o, nil
}
