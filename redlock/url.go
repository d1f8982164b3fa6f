package redlock

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	redlock://[user:password@]host1:port,host2:port,host3:port[/db]?ttl=10s&prefix=app:&drift=0.01&fence=true&restart_safety=true&max_ttl=30s&failovers=1&client=redigo&dial_timeout=5s
//
// redlocks:// is the same over TLS. The hosts are N independent masters, N
// odd and at least 3. Each parameter sets one field of Options:
//
//	drift=0.01            DriftFactor, in [0, 0.5)
//	drift_fixed=2ms       DriftFixed, at most lockswap.MaxTTL; drift_fixed=0 means none (a negative DriftFixed)
//	instance_timeout=50ms InstanceTimeout (absent: adaptive), at most lockswap.MaxTTL
//	max_extensions=100    MaxExtensions; -1 means no bound
//	max_hold=1h           MaxHold
//	fence=true            Fence
//	restart_safety=true   RestartSafety, which needs max_ttl
//	max_ttl=30s           MaxTTL, at most lockswap.MaxTTL (8760h)
//	failovers=1           Failovers, 0 to (N−1)/2; require=failover needs at least 1
//	master_names=a,b,c    MasterNames, one per host, in the hosts' order
//	log_keys=true         LogKeys
func init() {
	registry.Register(registry.RedisScheme("redlock", parseURL, "drift", "drift_fixed", "instance_timeout",
		"max_extensions", "max_hold", "fence", "restart_safety", "max_ttl", "failovers", "master_names"))
}

// parseURL checks this backend's parameters; registry checked the others.
func parseURL(u *registry.URL, r registry.Redis) (registry.RedisOpener, error) {
	o, err := urlOptions(u, r)
	if err != nil {
		return nil, err
	}
	return func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
		o := o
		if closer != nil {
			o.Closers = []io.Closer{closer}
		}
		return New(rcs, o)
	}, nil
}

// urlOptions returns the Options a URL sets: one field per parameter
// (TestURLOptions checks that every field a URL can set has one).
func urlOptions(u *registry.URL, r registry.Redis) (Options, error) {
	if r.Servers < 3 || r.Servers%2 == 0 {
		return Options{}, fmt.Errorf("redlock needs an odd number of at least 3 independent masters, got %d hosts: %w", r.Servers, lockswap.ErrInvalid)
	}
	o := Options{Prefix: r.Prefix, TTL: r.TTL, Logger: r.Logger, LogKeys: r.LogKeys}
	var err error
	if o.DriftFactor, err = u.Float("drift"); err != nil {
		return Options{}, err
	}
	if !(o.DriftFactor >= 0 && o.DriftFactor < 0.5) { // also NaN, which fails every comparison
		return Options{}, fmt.Errorf("drift=%v: want a factor in [0, 0.5) such as 0.01: %w", o.DriftFactor, lockswap.ErrInvalid)
	}
	if o.DriftFixed, err = driftFixed(u); err != nil {
		return Options{}, err
	}
	if o.InstanceTimeout, err = u.Duration("instance_timeout"); err != nil {
		return Options{}, err
	}
	if o.InstanceTimeout > lockswap.MaxTTL {
		return Options{}, fmt.Errorf("instance_timeout=%v is above the limit %v (lockswap.MaxTTL): %w", o.InstanceTimeout, lockswap.MaxTTL, lockswap.ErrInvalid)
	}
	if o.MaxExtensions, err = u.Int("max_extensions"); err != nil {
		return Options{}, err
	}
	if u.Query.Has("max_extensions") && o.MaxExtensions == 0 {
		return Options{}, fmt.Errorf("max_extensions=0: want a positive bound, or -1 for none (leave it out for the default %d): %w", DefaultMaxExtensions, lockswap.ErrInvalid)
	}
	if o.MaxHold, err = u.Duration("max_hold"); err != nil {
		return Options{}, err
	}
	if o.Fence, err = u.Bool("fence"); err != nil {
		return Options{}, err
	}
	if o.RestartSafety, err = u.Bool("restart_safety"); err != nil {
		return Options{}, err
	}
	if o.MaxTTL, err = u.Duration("max_ttl"); err != nil {
		return Options{}, err
	}
	if o.MaxTTL > lockswap.MaxTTL {
		return Options{}, fmt.Errorf("max_ttl=%v is above the limit %v (lockswap.MaxTTL, the longest TTL of any lock): %w", o.MaxTTL, lockswap.MaxTTL, lockswap.ErrInvalid)
	}
	if s := u.Query.Get("failovers"); s != "" {
		if o.Failovers, err = strconv.Atoi(s); err != nil || o.Failovers < 0 || o.Failovers > (r.Servers-1)/2 {
			return Options{}, fmt.Errorf("failovers=%s: want a whole number from 0 to %d, (N−1)/2 for the %d hosts (each costs one master of availability): %w", s, (r.Servers-1)/2, r.Servers, lockswap.ErrInvalid)
		}
	}
	if s := u.Query.Get("master_names"); s != "" {
		o.MasterNames = strings.Split(s, ",")
		if err := checkMasterNames(r.Servers, o.MasterNames); err != nil {
			return Options{}, fmt.Errorf("master_names=%s: %w", s, err)
		}
	}
	if o.RestartSafety && o.MaxTTL == 0 {
		return Options{}, fmt.Errorf("restart_safety needs max_ttl, the longest TTL any client uses on these masters: %w", lockswap.ErrInvalid)
	}
	if o.MaxTTL != 0 && o.TTL > o.MaxTTL {
		return Options{}, fmt.Errorf("ttl=%v exceeds max_ttl=%v: %w", o.TTL, o.MaxTTL, lockswap.ErrInvalid)
	}
	// The usable TTLs depend on the drift and a fixed instance timeout:
	// refuse here what New would refuse only after dialing.
	p := proto{opts: o.withDefaults()}
	if err := p.setTTLRange(); err != nil {
		return Options{}, err
	}
	if o.TTL != 0 {
		if err := p.checkTTL(o.TTL); err != nil {
			return Options{}, err
		}
	}
	return o, nil
}

// driftFixed returns drift_fixed= as Options.DriftFixed: absent is 0 (the
// default, 2 ms), drift_fixed=0 is none (a negative DriftFixed), else a
// positive duration at most lockswap.MaxTTL.
func driftFixed(u *registry.URL) (time.Duration, error) {
	if !u.Query.Has("drift_fixed") {
		return 0, nil
	}
	if d, err := time.ParseDuration(u.Query.Get("drift_fixed")); err == nil && d == 0 {
		return -1, nil
	}
	d, err := u.Duration("drift_fixed")
	if err != nil {
		return 0, err
	}
	if d > lockswap.MaxTTL {
		return 0, fmt.Errorf("drift_fixed=%v is above the limit %v (lockswap.MaxTTL): %w", d, lockswap.MaxTTL, lockswap.ErrInvalid)
	}
	return d, nil
}
