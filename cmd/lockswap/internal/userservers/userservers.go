// Package userservers is what the commands that run on the user's own
// servers (`lockswap compare` and `lockswap history` with --redis and
// --etcd) share: a check that every server answers before anything runs,
// and the deletion of every key a run wrote, under its random prefix.
package userservers

import (
	"context"
	"errors"
	"fmt"
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

// CheckTimeout bounds Check: the checks of all servers run at once, so an
// unreachable server fails the command within it.
const CheckTimeout = 3 * time.Second

// CleanupTimeout bounds RemoveKeys, even when the run's context has ended
// (Ctrl-C).
const CleanupTimeout = 5 * time.Second

// Servers are the user's servers (--redis, --etcd) and the login to the
// Redis ones.
type Servers struct {
	Redis []string // host:port
	Auth  Auth
	Etcd  []string // host:port
}

// Auth is the login to the user's Redis servers, and where the password
// came from ("--password", "REDISCLI_AUTH", ...), for messages. The
// password is never printed.
type Auth struct{ User, Password, From string }

// NewRedis returns a one-connection go-redis client of the user's server
// at addr, every call bounded by timeout and never retried.
func NewRedis(addr string, auth Auth, timeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Username: auth.User, Password: auth.Password,
		ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 1})
}

// Check makes sure every server of s answers before anything runs, so that
// an unreachable server is one clear error instead of a run of
// measurements of connection errors; cmd ("compare") starts the message.
// The error matches lockswap.ErrUnavailable and names each server that did
// not answer and why; when a Redis server refused the login (NOAUTH,
// WRONGPASS) it matches lockswap.ErrInvalid instead, says how to give a
// password or where the refused one came from, and names the servers that
// did not answer too.
func (s Servers) Check(ctx context.Context, cmd string) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
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
	for _, a := range s.Redis {
		check("--redis "+a, func(ctx context.Context) error {
			err := pingRedis(ctx, a, s.Auth)
			if IsAuthError(err) {
				mu.Lock()
				refused = append(refused, fmt.Sprintf("--redis %s: %v", a, err))
				mu.Unlock()
				return nil
			}
			return err
		})
	}
	for _, ep := range s.Etcd {
		check("--etcd "+ep, func(ctx context.Context) error { return pingEtcd(ctx, ep) })
	}
	wg.Wait()
	if len(refused) > 0 {
		sort.Strings(refused)
		hint := "the servers want a password: give it with --password, redis://[user]:password@host:port URLs in --redis, REDISCLI_AUTH or REDIS_PASSWORD"
		if s.Auth.Password != "" {
			hint = "the servers refused the user or password; the password came from " + s.Auth.From
		}
		if len(errs) > 0 {
			sort.Strings(errs)
			hint += "; and these did not answer: " + strings.Join(errs, "; ")
		}
		return fmt.Errorf("%s: your servers refused the login (nothing was run): %s (%s): %w", cmd, strings.Join(refused, "; "), hint, lockswap.ErrInvalid)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: your servers do not answer (nothing was run): %s: %w", cmd, strings.Join(errs, "; "), lockswap.ErrUnavailable)
}

// IsAuthError reports whether err is a server's refusal of the login
// (NOAUTH: a password is wanted; WRONGPASS: user or password refused).
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "invalid password")
}

func pingRedis(ctx context.Context, addr string, auth Auth) error {
	c := NewRedis(addr, auth, CheckTimeout)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within %v (%w)", CheckTimeout, err)
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
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: CheckTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Status(ctx, ep); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within %v (%w)", CheckTimeout, err)
		}
		return err
	}
	return nil
}

// RemoveKeys deletes every key on the user's Redis servers whose name
// contains prefix (a run's random prefix: the lock keys and the counters
// the backends keep beside them, such as singleredis's "{prefix...}:fence",
// which lives an hour). It is bounded by CleanupTimeout and independent of
// the run's context.
func (s Servers) RemoveKeys(prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
	defer cancel()
	var errs []error
	for _, a := range s.Redis {
		if err := removeKeys(ctx, a, s.Auth, prefix); err != nil {
			errs = append(errs, fmt.Errorf("delete the run's keys on %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

// DeleteKeys deletes the keys named names on every Redis server of s,
// each server within its own CleanupTimeout, independent of the run's
// context: for a run that knows the keys it wrote, without scanning the
// user's keyspace as RemoveKeys does.
func (s Servers) DeleteKeys(names []string) error {
	var errs []error
	for _, a := range s.Redis {
		ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
		c := NewRedis(a, s.Auth, CleanupTimeout)
		err := c.Del(ctx, names...).Err()
		c.Close()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("delete the run's keys on %s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

func removeKeys(ctx context.Context, addr string, auth Auth, prefix string) error {
	c := NewRedis(addr, auth, CleanupTimeout)
	defer c.Close()
	pattern := KeysPattern(prefix)
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

// KeysPattern is the Redis glob pattern of the keys whose name contains
// prefix, for SCAN and for a message that asks the user to delete them.
func KeysPattern(prefix string) string { return "*" + GlobEscape(prefix) + "*" }

// GlobEscape escapes the characters that are special in a Redis glob
// pattern, so that s matches only itself.
func GlobEscape(s string) string {
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
