package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
// ctx is the open's context (the one given to [Open]): a client that
// connects when it is made (rueidis) stops connecting when ctx ends,
// closes what it made and returns an error matching ctx.Err(); a client
// that connects on first use (go-redis, redigo) may ignore it. The
// dialers of a URL's servers run concurrently.
type RedisDialer func(ctx context.Context, s RedisServer) (redisclient.Client, io.Closer, error)

var (
	dialMu  sync.RWMutex
	dialers = map[string]RedisDialer{}
)

// RegisterRedisClient makes a Redis client library available as
// client=name in Redis URLs. The adapters redisclient/goredis,
// redisclient/redigo and redisclient/rueidis register themselves. It panics if name is taken.
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
	case "goredis", "redigo", "rueidis":
		return nil, invalid("client=%s: that client is not linked into this program (import github.com/lockswap/lockswap/redisclient/%s; linked: %s)", name, name, strings.Join(known, ", "))
	}
	return nil, invalid("client=%q: want goredis, redigo or rueidis (linked: %s)", name, strings.Join(known, ", "))
}

// RedisParams returns the query parameters every Redis backend takes
// (ttl, prefix, log_keys, client, dial_timeout: see [Redis]; the
// [TLSParams]) followed by extra, the backend's own.
func RedisParams(extra ...string) []string {
	p := append([]string{"ttl", "prefix", "log_keys", "client", "dial_timeout"}, TLSParams...)
	return append(p, extra...)
}

// Redis is what the URL of a Redis backend says in the same way for every
// Redis backend, checked.
type Redis struct {
	// Backend is the backend's name (Scheme.Name), for messages.
	Backend string
	// Servers is how many servers the URL names: the given clients, or
	// else the hosts.
	Servers int
	// Prefix is prefix=, prepended to every key; "" when absent.
	Prefix string
	// TTL is ttl=, within [lockswap.MinTTL, lockswap.MaxTTL]; 0 when
	// absent.
	TTL time.Duration
	// LogKeys is log_keys=, for the backend's Options.LogKeys: the
	// Logger's records carry the lock's key.
	LogKeys bool
	// Logger is Clients.Logger, for the backend's Options.Logger.
	Logger *slog.Logger
}

// One refuses any number of servers but one, with an error matching
// lockswap.ErrInvalid: for a backend of one Redis server.
func (r Redis) One() error {
	if r.Servers != 1 {
		return invalid("%s needs exactly one host:port, got %d", r.Backend, r.Servers)
	}
	return nil
}

// RedisOpener opens a Redis backend with its clients, one per server, and
// the closer the Locker must own and close (nil for given clients).
type RedisOpener func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error)

// RedisScheme returns the Scheme of a Redis backend named name, over TLS
// too, that takes the parameters of [RedisParams] and its own params. Its
// Parse checks what every Redis backend takes (the servers, the database
// in the path, client=, dial_timeout=, prefix=, ttl=: see
// [URL.RedisServers] and [URL.TTL]), then calls parse with it for the
// backend's own checks, and opens what parse returns with the URL's
// clients (see [OpenRedis]).
func RedisScheme(name string, parse func(u *URL, r Redis) (RedisOpener, error), params ...string) Scheme {
	return Scheme{
		Name: name, TLS: true, Params: RedisParams(params...),
		Parse: func(u *URL, c Clients) (OpenFunc, error) {
			r, err := ParseRedis(name, u, c)
			if err != nil {
				return nil, err
			}
			open, err := parse(u, r)
			if err != nil {
				return nil, err
			}
			return OpenRedis(u, c, open), nil
		},
	}
}

// ParseRedis checks what every Redis backend's URL takes (the servers,
// the database in the path, client=, dial_timeout=, prefix=, ttl=,
// log_keys=) and returns it, for the backend named name: what the Parse of
// a [RedisScheme] hands to the backend's own parse. It does not dial.
func ParseRedis(name string, u *URL, c Clients) (Redis, error) {
	n, err := u.RedisServers(c)
	if err != nil {
		return Redis{}, err
	}
	r := Redis{Backend: name, Servers: n, Prefix: u.Query.Get("prefix"), Logger: c.Logger}
	if r.TTL, err = u.TTL(); err != nil {
		return Redis{}, err
	}
	if r.LogKeys, err = u.Bool("log_keys"); err != nil {
		return Redis{}, err
	}
	return r, nil
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
	if _, err := u.TLSConfig(c); err != nil {
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
//
// The hosts are dialled concurrently, so that servers that do not answer
// cost one wait, not one each, and the call returns when ctx ends: it then
// closes every client already made and fails with an error matching
// ctx.Err() and lockswap.ErrUnavailable. Nothing it started runs on after
// it returned (it waits for its dialers, which end with ctx).
func RedisClients(ctx context.Context, u *URL, c Clients) ([]redisclient.Client, io.Closer, error) {
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
	if s.TLS, err = u.TLSConfig(c); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, connectEnded(u, err)
	}
	// A dialer that fails ends the others (dctx): one failure fails the
	// open, as when the hosts were dialled one after the other.
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	out := make([]redisclient.Client, len(u.Hosts))
	closers := make(multiCloser, len(u.Hosts))
	for i, addr := range u.Hosts {
		s := s
		s.Addr = addr
		wg.Go(func() {
			rc, closer, err := dial(dctx, s)
			mu.Lock()
			defer mu.Unlock()
			out[i], closers[i] = rc, closer
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		// Every dialer returned, but ctx ended meanwhile: a client made
		// lazily may not have looked at it.
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		closers.Close()
		// A dialer's error once ctx ended is ctx's doing (a connection
		// closed under it, a dial cancelled), unless the dialer refused
		// its configuration.
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(firstErr, lockswap.ErrInvalid) {
			return nil, nil, connectEnded(u, ctxErr)
		}
		return nil, nil, firstErr
	}
	return out, closers, nil
}

// connectEnded is the error of RedisClients when ctx ended (ctxErr)
// before every client was made: an outage as far as the caller can tell.
func connectEnded(u *URL, ctxErr error) error {
	return fmt.Errorf("connect to %s: %w before the Redis clients were made: %w", strings.Join(u.Hosts, ","), ctxErr, lockswap.ErrUnavailable)
}

// OpenRedis returns the OpenFunc of a Redis backend: it makes u's clients
// (see RedisClients) within the open's context, calls open with them and
// the closer the Locker must own (nil for given clients), and closes the
// clients if open fails.
func OpenRedis(u *URL, c Clients, open RedisOpener) OpenFunc {
	return func(ctx context.Context) (lockswap.Locker, error) {
		rcs, closer, err := RedisClients(ctx, u, c)
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
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
