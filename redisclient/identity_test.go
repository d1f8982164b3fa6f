package redisclient_test

import (
	"testing"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

// TestAddr: a client's identity is its server's address and database,
// normalized, whatever the client library or display name.
func TestAddr(t *testing.T) {
	pool := func() *redigoredis.Pool { return &redigoredis.Pool{} }
	gr := func(o *redis.Options) redisclient.Client {
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		return goredis.New(c)
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"b:7001", "A:7000"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"x": "h2:6379", "y": "h1:6379"}, DB: 1})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"s:26379"}})
	t.Cleanup(func() { cluster.Close(); ring.Close(); failover.Close() })
	for name, tc := range map[string]struct {
		c    redisclient.Client
		want string
	}{
		"go-redis":                  {gr(&redis.Options{Addr: "Redis.Internal:6379", DB: 2}), "redis.internal:6379/2"},
		"go-redis IPv6":             {gr(&redis.Options{Addr: "[0:0::1]:6379"}), "[::1]:6379/0"},
		"redigo named host:port":    {redigo.NewNamed(pool(), "redis.internal:6379"), "redis.internal:6379/0"},
		"redigo named host:port/db": {redigo.NewNamed(pool(), "REDIS.internal:6379/2"), "redis.internal:6379/2"},
		"redigo named otherwise":    {redigo.NewNamed(pool(), "cache pool"), ""},
		"redigo unnamed":            {redigo.New(pool()), ""},
		"cluster":                   {goredis.New(cluster), "cluster:a:7000,b:7001"},
		"ring":                      {goredis.New(ring), "ring:h1:6379,h2:6379/1"},
		"failover":                  {goredis.New(failover), ""},
	} {
		if got := tc.c.Addr(); got != tc.want {
			t.Errorf("%s: Addr() = %q, want %q", name, got, tc.want)
		}
	}
}

// TestSameStore: one server through both libraries is one store; two
// servers are two, named or not; a client of unknown address is only
// itself.
func TestSameStore(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	viaGoRedis := goredis.New(rdb)
	viaRedigo := redigo.NewNamed(&redigoredis.Pool{}, "127.0.0.1:6379")
	otherDB := redigo.NewNamed(&redigoredis.Pool{}, "127.0.0.1:6379/1")
	unnamedA, unnamedB := redigo.New(&redigoredis.Pool{}), redigo.New(&redigoredis.Pool{})
	for _, tc := range []struct {
		name string
		a, b redisclient.Client
		same bool
	}{
		{"one server, both libraries", viaGoRedis, viaRedigo, true},
		{"same client", unnamedA, unnamedA, true},
		{"another database", viaRedigo, otherDB, false},
		{"two unnamed pools", unnamedA, unnamedB, false},
		{"unnamed and named", unnamedA, viaRedigo, false},
		{"two named pools to two servers", viaRedigo, redigo.NewNamed(&redigoredis.Pool{}, "127.0.0.2:6379"), false},
	} {
		if got := redisclient.SameStore(tc.a, tc.b); got != tc.same {
			t.Errorf("%s: SameStore = %v, want %v", tc.name, got, tc.same)
		}
		if got := redisclient.Store(tc.a) == redisclient.Store(tc.b); got != tc.same {
			t.Errorf("%s: Store %q and %q equal = %v, want %v", tc.name, redisclient.Store(tc.a), redisclient.Store(tc.b), got, tc.same)
		}
	}
}
