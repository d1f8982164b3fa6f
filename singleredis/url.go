package singleredis

import (
	"fmt"
	"io"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	singleredis://[user:password@]host:port[/db]?ttl=10s&prefix=app:&fence=true&client=goredis&dial_timeout=5s
//
// singlerediss:// is the same over TLS; redis:// and rediss:// are aliases.
// The client library is client=goredis (the default) or client=redigo;
// the program must import its adapter (redisclient/goredis or
// redisclient/redigo), which package backend does.
func init() {
	registry.Register(registry.Scheme{
		Name: "singleredis", Aliases: []string{"redis"}, TLS: true,
		Params: []string{"ttl", "prefix", "fence", "client", "dial_timeout"},
		Parse:  parseURL,
	})
}

func parseURL(u *registry.URL, c registry.Clients) (registry.OpenFunc, error) {
	n, err := u.RedisServers(c)
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, fmt.Errorf("singleredis needs exactly one host:port, got %d: %w", n, lockswap.ErrInvalid)
	}
	o := Options{Prefix: u.Query.Get("prefix")}
	if o.TTL, err = u.TTL(); err != nil {
		return nil, err
	}
	if o.Fence, err = u.Bool("fence"); err != nil {
		return nil, err
	}
	return registry.OpenRedis(u, c, func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
		o := o
		o.Closer = closer
		return New(rcs[0], o)
	}), nil
}
