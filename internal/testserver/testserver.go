// Package testserver starts real servers for one test and stops them when it
// ends: redis-server processes, a fault-injecting TCP proxy and embedded etcd
// members or clusters (the servers of internal/servers), and miniredis.
//
// It is test infrastructure: only tests and test harnesses import it, never a
// library package or the lockswap command (internal/layers checks both). The
// functions ending in T fail or skip the test and register cleanup with
// t.Cleanup. The server types and starters of internal/servers are repeated
// here so that a test needs one import.
package testserver

import (
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap/internal/servers"
)

// RequireServersEnv is the environment variable that, when set to "1", turns
// a missing server binary into a test failure instead of a skip.
const RequireServersEnv = "LOCKSWAP_REQUIRE_SERVERS"

// The servers of internal/servers.
type (
	// Redis is a redis-server child process ([servers.Redis]).
	Redis = servers.Redis
	// RedisOptions configures a redis-server ([servers.RedisOptions]).
	RedisOptions = servers.RedisOptions
	// Proxy is a fault-injecting TCP proxy ([servers.Proxy]).
	Proxy = servers.Proxy
	// Etcd is a single-member embedded etcd ([servers.Etcd]).
	Etcd = servers.Etcd
	// EtcdCluster is an embedded etcd cluster ([servers.EtcdCluster]).
	EtcdCluster = servers.EtcdCluster
)

// StartRedis is [servers.StartRedis]: the caller stops the server.
func StartRedis(opts RedisOptions) (*Redis, error) { return servers.StartRedis(opts) }

// StartProxy is [servers.StartProxy]: the caller closes the proxy.
func StartProxy(target string) (*Proxy, error) { return servers.StartProxy(target) }

// StartEtcd is [servers.StartEtcd]: the caller closes the server.
func StartEtcd() (*Etcd, error) { return servers.StartEtcd() }

// StartEtcdCluster is [servers.StartEtcdCluster]: the caller closes the
// cluster.
func StartEtcdCluster(n int) (*EtcdCluster, error) { return servers.StartEtcdCluster(n) }

// FreePorts is [servers.FreePorts].
func FreePorts(n int) ([]int, error) { return servers.FreePorts(n) }

// RedisServerPath is [servers.RedisServerPath].
func RedisServerPath() (string, bool) { return servers.RedisServerPath() }

// NeedRedisServer returns the path of redis-server. If it is not on PATH the
// test is skipped, or fails when LOCKSWAP_REQUIRE_SERVERS=1.
func NeedRedisServer(t testing.TB) string {
	t.Helper()
	p, ok := servers.RedisServerPath()
	if ok {
		return p
	}
	if os.Getenv(RequireServersEnv) == "1" {
		t.Fatal("redis-server not found on PATH and " + RequireServersEnv + "=1; install it: apt-get install -y redis-server")
	}
	t.Skip("redis-server not found on PATH; set " + RequireServersEnv + "=1 to fail instead of skipping")
	return ""
}

// RedisT starts a redis-server for the test and stops it when the test ends.
// It skips the test if redis-server is missing (see NeedRedisServer) and
// fails it if the server does not start.
func RedisT(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	NeedRedisServer(t)
	r, err := servers.StartRedis(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// RedisClusterOfMasters starts n independent redis-servers (no replication,
// no Redis Cluster), as used by quorum algorithms such as Redlock.
func RedisClusterOfMasters(t testing.TB, n int) []*Redis {
	t.Helper()
	rs := make([]*Redis, n)
	for i := range rs {
		rs[i] = RedisT(t, RedisOptions{})
	}
	return rs
}

// Miniredis starts an in-process miniredis and closes it when the test ends.
func Miniredis(t testing.TB) *miniredis.Miniredis {
	t.Helper()
	return miniredis.RunT(t)
}

// ProxyT starts a proxy to target for the test and closes it when the test
// ends; it fails the test if the proxy cannot start.
func ProxyT(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := servers.StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// EtcdT starts a single-member etcd for the test and closes it when the
// test ends; it fails the test if etcd does not start.
func EtcdT(t testing.TB) *Etcd {
	t.Helper()
	e, err := servers.StartEtcd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// EtcdClusterT starts an n-member etcd cluster for the test and closes it
// when the test ends; it fails the test if the cluster does not start.
func EtcdClusterT(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	c, err := servers.StartEtcdCluster(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// EtcdBinaryT starts the etcd program on PATH (a server version other than
// the embedded one, such as Debian's etcd-server 3.4) for the test and
// stops it when the test ends. Without the program the test is skipped, or
// fails when LOCKSWAP_REQUIRE_SERVERS=1.
func EtcdBinaryT(t testing.TB) *servers.EtcdProcess {
	t.Helper()
	if _, ok := servers.EtcdBinaryPath(); !ok {
		if os.Getenv(RequireServersEnv) == "1" {
			t.Fatal("etcd not found on PATH and " + RequireServersEnv + "=1; install it: apt-get install -y etcd-server")
		}
		t.Skip("etcd not found on PATH; set " + RequireServersEnv + "=1 to fail instead of skipping")
	}
	e, err := servers.StartEtcdBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// The TLS helpers of internal/servers.
type (
	// CA is a test certificate authority ([servers.CA]).
	CA = servers.CA
	// KeyPair is a certificate and key as PEM files ([servers.KeyPair]).
	KeyPair = servers.KeyPair
	// RedisTLS is a redis-server with a TLS listener ([servers.RedisTLS]).
	RedisTLS = servers.RedisTLS
	// RedisTLSOptions configures it ([servers.RedisTLSOptions]).
	RedisTLSOptions = servers.RedisTLSOptions
)

// CAT makes a CA named name whose files live in the test's temporary
// directory.
func CAT(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := servers.NewCA(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// RedisTLST starts a redis-server with a TLS listener for the test and
// stops it when the test ends (see [servers.StartRedisTLS]). It skips or
// fails like RedisT when redis-server is missing.
func RedisTLST(t testing.TB, opts RedisTLSOptions) *RedisTLS {
	t.Helper()
	NeedRedisServer(t)
	r, err := servers.StartRedisTLS(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// EtcdTLSOptions configures an etcd with TLS ([servers.EtcdTLSOptions]).
type EtcdTLSOptions = servers.EtcdTLSOptions

// EtcdUser is a user of such an etcd ([servers.EtcdUser]).
type EtcdUser = servers.EtcdUser

// EtcdTLST starts a single-member etcd serving clients over TLS for the
// test and closes it when the test ends (see [servers.StartEtcdTLS]).
func EtcdTLST(t testing.TB, opts EtcdTLSOptions) *Etcd {
	t.Helper()
	e, err := servers.StartEtcdTLS(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}
