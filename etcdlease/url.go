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
//	etcdlease://[user:password@]host1:2379[,host2:2379...]?prefix=/locks/&ttl=10s&request_timeout=5s&cluster_size=3&log_keys=true&dial_timeout=5s
//
// etcdleases:// is the same over TLS, and takes registry.TLSParams
// (tls_ca=, tls_cert=, tls_key=, tls_server_name=); etcd:// and etcds://
// are aliases. prefix=, ttl=, request_timeout=, cluster_size= (at least 1)
// and log_keys= set the fields of Options of the same names. A
// *clientv3.Client given as registry.Clients.Client is used instead of the
// hosts (and not closed).
func init() {
	registry.Register(registry.Scheme{
		Name: Backend, Aliases: []string{"etcd"}, TLS: true,
		Params: append([]string{"ttl", "prefix", "request_timeout", "cluster_size", "log_keys", "dial_timeout"}, registry.TLSParams...),
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
	o, err := urlOptions(u, c)
	if err != nil {
		return nil, err
	}
	dial, err := u.Duration("dial_timeout")
	if err != nil {
		return nil, err
	}
	tlsConfig, err := u.TLSConfig(c)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (lockswap.Locker, error) {
		if given != nil {
			return newContext(ctx, given, o)
		}
		scheme := "http://"
		cfg := Config{Username: u.Username, Password: u.Password, DialTimeout: dial, Prefix: o.Prefix, TTL: o.TTL,
			RequestTimeout: o.RequestTimeout, ClusterSize: o.ClusterSize, Logger: o.Logger, LogKeys: o.LogKeys}
		if u.TLS {
			scheme, cfg.TLS = "https://", tlsConfig
		}
		for _, h := range u.Hosts {
			cfg.Endpoints = append(cfg.Endpoints, scheme+h)
		}
		return OpenContext(ctx, cfg)
	}, nil
}

// urlOptions returns the Options a URL sets: one field per parameter
// (TestURLOptions checks that every field a URL can set has one).
func urlOptions(u *registry.URL, c registry.Clients) (Options, error) {
	o := Options{Prefix: u.Query.Get("prefix"), Logger: c.Logger}
	var err error
	if o.TTL, err = u.TTL(); err != nil {
		return Options{}, err
	}
	if min, max := ttlRange(); o.TTL != 0 && (o.TTL < min || o.TTL > max) {
		return Options{}, errTTLRange(fmt.Sprintf("ttl=%v", o.TTL))
	}
	if o.RequestTimeout, err = u.Duration("request_timeout"); err != nil {
		return Options{}, err
	}
	if o.ClusterSize, err = u.Int("cluster_size"); err != nil {
		return Options{}, err
	}
	if u.Query.Has("cluster_size") && o.ClusterSize < 1 {
		return Options{}, fmt.Errorf("cluster_size=%d: want the number of etcd members, at least 1 (left out, it is the number of hosts): %w", o.ClusterSize, lockswap.ErrInvalid)
	}
	if o.LogKeys, err = u.Bool("log_keys"); err != nil {
		return Options{}, err
	}
	if err := o.validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}
