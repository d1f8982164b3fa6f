package singleredis

import (
	"io"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	singleredis://[user:password@]host:port[/db]?ttl=10s&prefix=app:&fence=true&fair_wait=true&log_keys=true&client=goredis&dial_timeout=5s
//
// singlerediss:// is the same over TLS; redis:// and rediss:// are aliases.
// The client library is client=goredis (the default) or client=redigo;
// the program must import its adapter (redisclient/goredis or
// redisclient/redigo), which package backend does.
func init() {
	s := registry.RedisScheme("singleredis", parseURL, "fence", "fair_wait")
	s.Aliases = []string{"redis"}
	registry.Register(s)
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
	if o.Fence, err = u.Bool("fence"); err != nil {
		return Options{}, err
	}
	if o.FairWait, err = u.Bool("fair_wait"); err != nil {
		return Options{}, err
	}
	return o, nil
}
