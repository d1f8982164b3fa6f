package singleredis

import (
	"io"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	singleredis://[user:password@]host:port[/db]?ttl=10s&prefix=app:&fence=true&fair_wait=true&client=goredis&dial_timeout=5s
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
	if err := r.One(); err != nil {
		return nil, err
	}
	o := Options{Prefix: r.Prefix, TTL: r.TTL, Logger: r.Logger}
	var err error
	if o.Fence, err = u.Bool("fence"); err != nil {
		return nil, err
	}
	if o.FairWait, err = u.Bool("fair_wait"); err != nil {
		return nil, err
	}
	return func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
		o := o
		o.Closer = closer
		return New(rcs[0], o)
	}, nil
}
