package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap"
)

// This file holds what compare does differently on servers it did not
// start (--redis, --etcd): it checks that they answer before anything runs,
// it does not run what would harm them, and it deletes every key it wrote.

// errWouldHarm: the scenario injects a fault (kill, restart, failover)
// that would harm servers the comparison did not start.
var errWouldHarm = fmt.Errorf("%w: it would harm them (it kills, restarts, fails over, stops or hangs servers)", errUserServers)

// userCheckTimeout bounds the check that the user's servers answer; the
// checks of all servers run at once, so an unreachable server fails the
// comparison within it.
const userCheckTimeout = 3 * time.Second

// userCleanupTimeout bounds the deletion of compare's keys after each
// scenario, even when the run's context has ended (Ctrl-C).
const userCleanupTimeout = 5 * time.Second

// checkUserServers makes sure every server given with --redis and --etcd
// answers before any scenario runs, so that an unreachable server is one
// clear error instead of a run of measurements of connection errors. The
// error matches lockswap.ErrUnavailable and names each server that did not
// answer and why; when a Redis server refused the login (NOAUTH,
// WRONGPASS) it matches lockswap.ErrInvalid instead, says how to give a
// password or where the refused one came from, and names the servers that
// did not answer too.
func checkUserServers(ctx context.Context, e *env) error {
	ctx, cancel := context.WithTimeout(ctx, userCheckTimeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	check := func(what string, ping func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ping(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", what, err))
				mu.Unlock()
			}
		}()
	}
	var refused []string // servers that refused the login
	for _, a := range e.redisAddrs {
		check("--redis "+a, func(ctx context.Context) error {
			err := pingRedis(ctx, a, e.redisAuth)
			if isAuthError(err) {
				mu.Lock()
				refused = append(refused, fmt.Sprintf("--redis %s: %v", a, err))
				mu.Unlock()
				return nil
			}
			return err
		})
	}
	for _, ep := range e.etcdEndpoints {
		check("--etcd "+ep, func(ctx context.Context) error { return pingEtcd(ctx, ep) })
	}
	wg.Wait()
	if len(refused) > 0 {
		sort.Strings(refused)
		hint := "the servers want a password: give it with --password, redis://[user]:password@host:port URLs in --redis, REDISCLI_AUTH or REDIS_PASSWORD"
		if e.redisAuth.password != "" {
			hint = "the servers refused the user or password; the password came from " + e.redisAuth.from
		}
		if len(errs) > 0 {
			sort.Strings(errs)
			hint += "; and these did not answer: " + strings.Join(errs, "; ")
		}
		return fmt.Errorf("compare: your servers refused the login (nothing was run): %s (%s): %w", strings.Join(refused, "; "), hint, lockswap.ErrInvalid)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("compare: your servers do not answer (nothing was run): %s: %w", strings.Join(errs, "; "), lockswap.ErrUnavailable)
}

// userServers is what a column runs on when the user gave their own
// servers (--redis for the Redis backends, --etcd for etcdlease); else
// the servers compare starts, as the column says.
func userServers(c Column, o Options) string {
	switch {
	case c.Backend == "etcdlease" && len(o.EtcdEndpoints) > 0:
		return "your --etcd endpoints"
	case c.Backend == "etcdlease" || len(o.RedisAddrs) == 0:
		return c.Servers
	case c.kit.serverWideKey != "":
		return "not run on your --redis servers: it keeps a server-wide key"
	}
	return "your --redis servers"
}

// redisAuth is the login to the user's Redis servers, and where the
// password came from (Options.RedisPasswordFrom), for messages.
type redisAuth struct{ user, password, from string }

func newUserRedis(addr string, auth redisAuth, timeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Username: auth.user, Password: auth.password,
		ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 1})
}

// isAuthError reports whether err is a server's refusal of the login
// (NOAUTH: a password is wanted; WRONGPASS: user or password refused).
func isAuthError(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "invalid password")
}

func pingRedis(ctx context.Context, addr string, auth redisAuth) error {
	c := newUserRedis(addr, auth, userCheckTimeout)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within %v (%w)", userCheckTimeout, err)
		}
		return err
	}
	return nil
}

func pingEtcd(ctx context.Context, endpoint string) error {
	ep := endpoint
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	// A plain dial first: gRPC reports a refused connection only as its
	// own deadline passing.
	hostPort := ep[strings.Index(ep, "://")+3:]
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return err
	}
	conn.Close()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: userCheckTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Status(ctx, ep); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within %v (%w)", userCheckTimeout, err)
		}
		return err
	}
	return nil
}

// removeUserKeys deletes every key on the user's Redis servers whose name
// contains prefix (compare's random per-run prefix: the lock keys and the
// counters the backends keep beside them, such as singleredis's
// "{prefix...}:fence", which lives an hour, and redlock's, which has no
// TTL). It is bounded by
// userCleanupTimeout and independent of the run's context.
// MsgKeysLeft is compare's warning that it could not delete its keys from
// the user's servers (attributes "pattern", the keys to delete, and
// "error").
const MsgKeysLeft = "compare could not delete its keys from your servers: delete the keys matching pattern"

// cleanUserServers deletes compare's keys from the user's servers and
// warns, through Options.Log, when it could not: a key left behind is the
// user's to delete, so they must hear of it.
func cleanUserServers(e *env) {
	err := removeUserKeys(e.redisAddrs, e.redisAuth, e.prefix)
	if err != nil && e.warn != nil {
		slog.New(e.warn).Warn(MsgKeysLeft, "pattern", "*"+globEscape(e.prefix)+"*", "error", err)
	}
}

func removeUserKeys(addrs []string, auth redisAuth, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), userCleanupTimeout)
	defer cancel()
	var errs []error
	for _, a := range addrs {
		if err := removeKeys(ctx, a, auth, prefix); err != nil {
			errs = append(errs, fmt.Errorf("delete compare's keys on %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

func removeKeys(ctx context.Context, addr string, auth redisAuth, prefix string) error {
	c := newUserRedis(addr, auth, userCleanupTimeout)
	defer c.Close()
	pattern := "*" + globEscape(prefix) + "*"
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := c.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape escapes the characters that are special in a Redis glob
// pattern, so that s matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
