package redlock

import (
	"fmt"
	"io"
	"strconv"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	redlock://[user:password@]host1:port,host2:port,host3:port[/db]?ttl=10s&prefix=app:&drift=0.01&fence=true&restart_safety=true&max_ttl=30s&failovers=1&client=redigo&dial_timeout=5s
//
// redlocks:// is the same over TLS. The hosts are N independent masters, N
// odd and at least 3. fence=true is Options.Fence, failovers=f
// Options.Failovers (0 to (N−1)/2; require=failover needs at least 1),
// max_ttl Options.MaxTTL (at most lockswap.MaxTTL, 8760h).
func init() {
	registry.Register(registry.RedisScheme("redlock", parseURL, "drift", "fence", "restart_safety", "max_ttl", "failovers"))
}

// parseURL checks this backend's parameters; registry checked the others.
func parseURL(u *registry.URL, r registry.Redis) (registry.RedisOpener, error) {
	if r.Servers < 3 || r.Servers%2 == 0 {
		return nil, fmt.Errorf("redlock needs an odd number of at least 3 independent masters, got %d hosts: %w", r.Servers, lockswap.ErrInvalid)
	}
	o := Options{Prefix: r.Prefix, TTL: r.TTL, Logger: r.Logger}
	var err error
	if o.DriftFactor, err = u.Float("drift"); err != nil {
		return nil, err
	}
	if !(o.DriftFactor >= 0 && o.DriftFactor < 0.5) { // also NaN, which fails every comparison
		return nil, fmt.Errorf("drift=%v: want a factor in [0, 0.5) such as 0.01: %w", o.DriftFactor, lockswap.ErrInvalid)
	}
	if o.Fence, err = u.Bool("fence"); err != nil {
		return nil, err
	}
	if o.RestartSafety, err = u.Bool("restart_safety"); err != nil {
		return nil, err
	}
	if o.MaxTTL, err = u.Duration("max_ttl"); err != nil {
		return nil, err
	}
	if o.MaxTTL > lockswap.MaxTTL {
		return nil, fmt.Errorf("max_ttl=%v is above the limit %v (lockswap.MaxTTL, the longest TTL of any lock): %w", o.MaxTTL, lockswap.MaxTTL, lockswap.ErrInvalid)
	}
	if s := u.Query.Get("failovers"); s != "" {
		if o.Failovers, err = strconv.Atoi(s); err != nil || o.Failovers < 0 || o.Failovers > (r.Servers-1)/2 {
			return nil, fmt.Errorf("failovers=%s: want a whole number from 0 to %d, (N−1)/2 for the %d hosts (each costs one master of availability): %w", s, (r.Servers-1)/2, r.Servers, lockswap.ErrInvalid)
		}
	}
	if o.RestartSafety && o.MaxTTL == 0 {
		return nil, fmt.Errorf("restart_safety needs max_ttl, the longest TTL any client uses on these masters: %w", lockswap.ErrInvalid)
	}
	if o.MaxTTL != 0 && o.TTL > o.MaxTTL {
		return nil, fmt.Errorf("ttl=%v exceeds max_ttl=%v: %w", o.TTL, o.MaxTTL, lockswap.ErrInvalid)
	}
	return func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
		o := o
		if closer != nil {
			o.Closers = []io.Closer{closer}
		}
		return New(rcs, o)
	}, nil
}
