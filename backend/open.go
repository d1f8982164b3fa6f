package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

// EnvVar is the environment variable FromEnv reads by default.
const EnvVar = "LOCKSWAP_URL"

// Clients are already built clients for Open, for users with their own
// pools and TLS setup. When a field is set, Open uses it instead of dialing
// Config.Addrs, and Close leaves it open.
type Clients struct {
	// Redis are the Redis clients: one for singleredis and legacysetnx, one
	// per master for redlock.
	Redis []redisclient.Client
	// Etcd is the etcd client for the etcd backend.
	Etcd *clientv3.Client
	// TLS is the TLS configuration for clients Open builds itself when
	// Config.TLS is set; nil means the system roots.
	TLS *tls.Config
}

// OpenURL parses raw and opens the backend it names.
func OpenURL(ctx context.Context, raw string) (lockswap.Locker, error) {
	c, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return Open(ctx, c, Clients{})
}

// FromEnv opens the backend named by the URL in the environment variable
// name (EnvVar when name is empty).
func FromEnv(ctx context.Context, name string) (lockswap.Locker, error) {
	if name == "" {
		name = EnvVar
	}
	raw, ok := os.LookupEnv(name)
	if !ok || raw == "" {
		return nil, invalid("environment variable %s is not set; set it to a backend URL such as singleredis://127.0.0.1:6379", name)
	}
	lk, err := OpenURL(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return lk, nil
}

// opener opens one backend from a validated Config.
type opener func(ctx context.Context, c Config, cl Clients) (lockswap.Locker, error)

// openers is filled by the files of each backend (init), keyed by name.
var openers = map[string]opener{}

// Open opens the backend c describes, using the clients in cl where given.
// It fails with an error matching lockswap.ErrInvalid, naming the missing
// property, when the backend's Guarantees lack one of c.Require.
func Open(ctx context.Context, c Config, cl Clients) (lockswap.Locker, error) {
	v := c
	if cl.Etcd != nil && c.Backend == Etcd && len(v.Addrs) == 0 {
		v.Addrs = []string{"given-client:1"}
	}
	if len(cl.Redis) > 0 {
		// Given clients stand for the hosts: validate their number instead.
		v.Addrs = nil
		for range cl.Redis {
			v.Addrs = append(v.Addrs, "given-client:1")
		}
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	open, ok := openers[c.Backend]
	if !ok {
		return nil, invalid("backend %q is not available in this build", c.Backend)
	}
	lk, err := open(ctx, c, cl)
	if err != nil {
		return nil, fmt.Errorf("backend: open %s: %w", c, err)
	}
	if len(c.Require) > 0 {
		props := make([]lockswap.Property, len(c.Require))
		for i, r := range c.Require {
			props[i] = lockswap.Property(r)
		}
		if err := lk.Guarantees().Require(props...); err != nil {
			lk.Close()
			return nil, fmt.Errorf("backend: open %s: %w", c, err)
		}
	}
	return lk, nil
}

// redisClients returns the Redis clients for c: cl.Redis when given (not
// closed by the Locker), otherwise new clients for c.Addrs and a closer for
// them.
func redisClients(c Config, cl Clients) ([]redisclient.Client, io.Closer, error) {
	if len(cl.Redis) > 0 {
		for i, rc := range cl.Redis {
			if redisclient.IsNil(rc) {
				return nil, nil, invalid("Clients.Redis[%d] is nil", i)
			}
		}
		return cl.Redis, nil, nil
	}
	var closers multiCloser
	var out []redisclient.Client
	dialTimeout := time.Duration(c.DialTimeout)
	if dialTimeout == 0 {
		dialTimeout = 5 * time.Second
	}
	var tlsConf *tls.Config
	if c.TLS {
		tlsConf = cl.TLS
		if tlsConf == nil {
			tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	for _, addr := range c.Addrs {
		switch c.Client {
		case "", "goredis":
			rdb := redis.NewClient(&redis.Options{
				Addr: addr, Username: c.Username, Password: c.Password, DB: c.DB,
				TLSConfig: tlsConf, DialTimeout: dialTimeout, ContextTimeoutEnabled: true,
			})
			closers = append(closers, rdb)
			out = append(out, goredis.New(rdb))
		case "redigo":
			opts := []redigoredis.DialOption{
				redigoredis.DialConnectTimeout(dialTimeout), redigoredis.DialDatabase(c.DB),
				redigoredis.DialUsername(c.Username), redigoredis.DialPassword(c.Password),
			}
			if tlsConf != nil {
				opts = append(opts, redigoredis.DialUseTLS(true), redigoredis.DialTLSConfig(tlsConf))
			}
			a := addr
			pool := &redigoredis.Pool{MaxIdle: 64, IdleTimeout: 5 * time.Minute,
				DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
					return redigoredis.DialContext(ctx, "tcp", a, opts...)
				}}
			closers = append(closers, pool)
			out = append(out, redigo.NewNamed(pool, addr))
		}
	}
	return out, closers, nil
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
