package redlock

import (
	"fmt"
	"io"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	redlock://[user:password@]host1:port,host2:port,host3:port[/db]?ttl=10s&prefix=app:&drift=0.01&restart_safety=true&max_ttl=30s&client=redigo&dial_timeout=5s
//
// redlocks:// is the same over TLS. The hosts are N independent masters, N
// odd and at least 3.
func init() {
	registry.Register(registry.Scheme{
		Name: "redlock", TLS: true,
		Params: []string{"ttl", "prefix", "drift", "client", "dial_timeout", "restart_safety", "max_ttl"},
		Parse:  parseURL,
	})
}

func parseURL(u *registry.URL, c registry.Clients) (registry.OpenFunc, error) {
	n, err := u.RedisServers(c)
	if err != nil {
		return nil, err
	}
	if n < 3 || n%2 == 0 {
		return nil, fmt.Errorf("redlock needs an odd number of at least 3 independent masters, got %d hosts: %w", n, lockswap.ErrInvalid)
	}
	o := Options{Prefix: u.Query.Get("prefix")}
	if o.TTL, err = u.TTL(); err != nil {
		return nil, err
	}
	if o.DriftFactor, err = u.Float("drift"); err != nil {
		return nil, err
	}
	if !(o.DriftFactor >= 0 && o.DriftFactor < 0.5) { // also NaN, which fails every comparison
		return nil, fmt.Errorf("drift=%v: want a factor in [0, 0.5) such as 0.01: %w", o.DriftFactor, lockswap.ErrInvalid)
	}
	if o.RestartSafety, err = u.Bool("restart_safety"); err != nil {
		return nil, err
	}
	if o.MaxTTL, err = u.Duration("max_ttl"); err != nil {
		return nil, err
	}
	if o.RestartSafety && o.MaxTTL == 0 {
		return nil, fmt.Errorf("restart_safety needs max_ttl, the longest TTL any client uses on these masters: %w", lockswap.ErrInvalid)
	}
	if o.MaxTTL != 0 && o.TTL > o.MaxTTL {
		return nil, fmt.Errorf("ttl=%v exceeds max_ttl=%v: %w", o.TTL, o.MaxTTL, lockswap.ErrInvalid)
	}
	return registry.OpenRedis(u, c, func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
		o := o
		if closer != nil {
			o.Closers = []io.Closer{closer}
		}
		return New(rcs, o)
	}), nil
}
