package backend

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"

	// The built-in backends and Redis clients register themselves.
	_ "github.com/lockswap/lockswap/etcdlease"
	_ "github.com/lockswap/lockswap/legacysetnx"
	_ "github.com/lockswap/lockswap/memlock"
	_ "github.com/lockswap/lockswap/migrate"
	_ "github.com/lockswap/lockswap/redisclient/goredis"
	_ "github.com/lockswap/lockswap/redisclient/redigo"
	_ "github.com/lockswap/lockswap/redisclient/rueidis"
	_ "github.com/lockswap/lockswap/redlock"
	_ "github.com/lockswap/lockswap/singleredis"
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
	// Logger is passed on to the backend's Options.Logger (see
	// docs/observability.md); nil: the backend logs nothing.
	Logger *slog.Logger
}

// OpenURL parses raw and opens the backend it names.
func OpenURL(ctx context.Context, raw string) (lockswap.Locker, error) {
	c, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	return Open(ctx, c, Clients{})
}

// FromEnv opens the backend the environment names under name (EnvVar
// when name is empty): the URL in the variable name, or, during a
// migration, the migrate Locker of the variables MigrateEnv names, which
// take precedence (see EnvURL).
func FromEnv(ctx context.Context, name string) (lockswap.Locker, error) {
	raw, from, err := EnvURL(name)
	if err != nil {
		return nil, err
	}
	lk, err := OpenURL(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return lk, nil
}

// Open opens the backend c describes, using the clients in cl where given.
// It returns the backend's own Locker (a *singleredis.Locker for
// singleredis, and so on). It fails with an error matching
// lockswap.ErrInvalid, naming the missing property, when the backend's
// Guarantees lack one of c.Require.
func Open(ctx context.Context, c Config, cl Clients) (lockswap.Locker, error) {
	rc := registry.Clients{Redis: cl.Redis, TLS: cl.TLS, Logger: cl.Logger}
	if cl.Etcd != nil {
		rc.Client = cl.Etcd
	}
	lk, err := registry.Open(ctx, c.url(), rc)
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	return lk, nil
}
