package testserver

import (
	"os"
	"testing"

	"github.com/lockswap/lockswap/internal/servers"
)

type (
	// RedisCluster is a Redis Cluster of redis-server processes
	// ([servers.RedisCluster]).
	RedisCluster = servers.RedisCluster
	// RedisClusterOptions configures a Redis Cluster
	// ([servers.RedisClusterOptions]).
	RedisClusterOptions = servers.RedisClusterOptions
)

// RedisClusterT starts a Redis Cluster for the test (see
// [servers.StartRedisCluster]) and stops it when the test ends. It skips
// the test if redis-server or redis-cli is missing, or fails it when
// LOCKSWAP_REQUIRE_SERVERS=1; it fails the test if the cluster does not
// come up.
func RedisClusterT(t testing.TB, opts RedisClusterOptions) *RedisCluster {
	t.Helper()
	NeedRedisServer(t)
	if _, ok := servers.RedisCLIPath(); !ok {
		if os.Getenv(RequireServersEnv) == "1" {
			t.Fatal("redis-cli not found on PATH and " + RequireServersEnv + "=1; install it: apt-get install -y redis-tools")
		}
		t.Skip("redis-cli not found on PATH; set " + RequireServersEnv + "=1 to fail instead of skipping")
	}
	c, err := servers.StartRedisCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}
