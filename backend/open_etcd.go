package backend

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/etcdlease"
)

func init() {
	openers[Etcd] = func(_ context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		if cl.Etcd != nil {
			return etcdlease.New(cl.Etcd, etcdlease.Options{Prefix: c.Prefix, TTL: time.Duration(c.TTL)})
		}
		scheme := "http://"
		var tlsConf *tls.Config
		if c.TLS {
			scheme = "https://"
			tlsConf = cl.TLS
			if tlsConf == nil {
				tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
			}
		}
		eps := make([]string, len(c.Addrs))
		for i, a := range c.Addrs {
			eps[i] = scheme + a
		}
		return etcdlease.Open(etcdlease.Config{Endpoints: eps, Username: c.Username, Password: c.Password,
			TLS: tlsConf, DialTimeout: time.Duration(c.DialTimeout), Prefix: c.Prefix, TTL: time.Duration(c.TTL)})
	}
}
