package etcdlease

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	etcdlease://[user:password@]host1:2379[,host2:2379...]?prefix=/locks/&ttl=10s&dial_timeout=5s
//
// etcdleases:// is the same over TLS, and takes registry.TLSParams
// (tls_ca=, tls_cert=, tls_key=, tls_server_name=); etcd:// and etcds://
// are aliases. A
// *clientv3.Client given as registry.Clients.Client is used instead of the
// hosts (and not closed).
func init() {
	registry.Register(registry.Scheme{
		Name: Backend, Aliases: []string{"etcd"}, TLS: true,
		Params: append([]string{"ttl", "prefix", "dial_timeout"}, registry.TLSParams...),
		Parse:  parseURL,
	})
}

func parseURL(u *registry.URL, c registry.Clients) (registry.OpenFunc, error) {
	if err := u.NoPath(); err != nil {
		return nil, err
	}
	var given *clientv3.Client
	if c.Client != nil {
		var ok bool
		if given, ok = c.Client.(*clientv3.Client); !ok || given == nil {
			return nil, fmt.Errorf("%s: the given client is a %T, want a non-nil *clientv3.Client: %w", Backend, c.Client, lockswap.ErrInvalid)
		}
	} else if len(u.Hosts) == 0 {
		return nil, fmt.Errorf("etcd needs at least one endpoint host:port: %w", lockswap.ErrInvalid)
	}
	ttl, err := u.TTL()
	if err != nil {
		return nil, err
	}
	if min, max := ttlRange(); ttl != 0 && (ttl < min || ttl > max) {
		return nil, errTTLRange(fmt.Sprintf("ttl=%v", ttl))
	}
	dial, err := u.Duration("dial_timeout")
	if err != nil {
		return nil, err
	}
	tlsConfig, err := u.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	prefix := u.Query.Get("prefix")
	return func(ctx context.Context) (lockswap.Locker, error) {
		if given != nil {
			return newContext(ctx, given, Options{Prefix: prefix, TTL: ttl, Logger: c.Logger})
		}
		scheme := "http://"
		cfg := Config{Username: u.Username, Password: u.Password, DialTimeout: dial, Prefix: prefix, TTL: ttl, Logger: c.Logger}
		if u.TLS {
			scheme, cfg.TLS = "https://", tlsConfig
		}
		for _, h := range u.Hosts {
			cfg.Endpoints = append(cfg.Endpoints, scheme+h)
		}
		return OpenContext(ctx, cfg)
	}, nil
}
