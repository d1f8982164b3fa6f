package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
)

// DefaultRedisClient is the client library of a Redis URL without client=.
const DefaultRedisClient = "goredis"

// RedisServer is what a Redis URL says about connecting to one server.
type RedisServer struct {
	Addr               string
	Username, Password string
	DB                 int
	// TLS is nil without TLS.
	TLS         *tls.Config
	DialTimeout time.Duration
}

// A RedisDialer makes a client for one Redis server, and what closes it.
type RedisDialer func(s RedisServer) (redisclient.Client, io.Closer, error)

var (
	dialMu  sync.RWMutex
	dialers = map[string]RedisDialer{}
)

// RegisterRedisClient makes a Redis client library available as
// client=name in Redis URLs. The adapters redisclient/goredis and
// redisclient/redigo register themselves. It panics if name is taken.
func RegisterRedisClient(name string, d RedisDialer) {
	dialMu.Lock()
	defer dialMu.Unlock()
	if _, dup := dialers[name]; dup || d == nil {
		panic("registry: Redis client " + name + " registered twice or nil")
	}
	dialers[name] = d
}

func redisDialer(name string) (RedisDialer, error) {
	if name == "" {
		name = DefaultRedisClient
	}
	dialMu.RLock()
	defer dialMu.RUnlock()
	if d, ok := dialers[name]; ok {
		return d, nil
	}
	var known []string
	for n := range dialers {
		known = append(known, n)
	}
	sort.Strings(known)
	switch name {
	case "goredis", "redigo":
		return nil, invalid("client=%s: that client is not linked into this program (import github.com/lockswap/lockswap/redisclient/%s; linked: %s)", name, name, strings.Join(known, ", "))
	}
	return nil, invalid("client=%q: want goredis or redigo (linked: %s)", name, strings.Join(known, ", "))
}

// RedisServers checks the Redis parts of u (client=, dial_timeout=, the
// database in the path) and returns how many servers it names: the number
// of given clients in c, or else of hosts.
func (u *URL) RedisServers(c Clients) (int, error) {
	if _, err := u.DB(); err != nil {
		return 0, err
	}
	if _, err := u.Duration("dial_timeout"); err != nil {
		return 0, err
	}
	if len(c.Redis) > 0 {
		for i, rc := range c.Redis {
			if redisclient.IsNil(rc) {
				return 0, invalid("given Redis client %d is nil", i)
			}
		}
		return len(c.Redis), nil
	}
	if _, err := redisDialer(u.Query.Get("client")); err != nil {
		return 0, err
	}
	return len(u.Hosts), nil
}

// RedisClients returns the Redis clients for u: those given in c (the
// Locker must not close them, and the closer is nil), or else one per host,
// dialled by the library client= names, and a closer for them.
func RedisClients(u *URL, c Clients) ([]redisclient.Client, io.Closer, error) {
	if _, err := u.RedisServers(c); err != nil {
		return nil, nil, err
	}
	if len(c.Redis) > 0 {
		return c.Redis, nil, nil
	}
	dial, err := redisDialer(u.Query.Get("client"))
	if err != nil {
		return nil, nil, err
	}
	db, _ := u.DB()
	timeout, _ := u.Duration("dial_timeout")
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	s := RedisServer{Username: u.Username, Password: u.Password, DB: db, DialTimeout: timeout}
	if u.TLS {
		s.TLS = c.TLSConfig()
	}
	var closers multiCloser
	out := make([]redisclient.Client, 0, len(u.Hosts))
	for _, addr := range u.Hosts {
		s.Addr = addr
		rc, closer, err := dial(s)
		if err != nil {
			closers.Close()
			return nil, nil, err
		}
		out = append(out, rc)
		if closer != nil {
			closers = append(closers, closer)
		}
	}
	return out, closers, nil
}

// OpenRedis returns the OpenFunc of a Redis backend: it makes u's clients
// (see RedisClients), calls open with them and the closer the Locker must
// own (nil for given clients), and closes the clients if open fails.
func OpenRedis(u *URL, c Clients, open func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error)) OpenFunc {
	return func(context.Context) (lockswap.Locker, error) {
		rcs, closer, err := RedisClients(u, c)
		if err != nil {
			return nil, err
		}
		lk, err := open(rcs, closer)
		if err != nil && closer != nil {
			closer.Close()
		}
		return lk, err
	}
}

type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
