package goredis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

func TestNilClient(t *testing.T) {
	var rc *redis.Client
	if goredis.New(rc) != nil || goredis.New(nil) != nil {
		t.Error("adapters of nil clients must be nil, so that backends reject them")
	}
}

func TestStringHidesPassword(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", Password: "hunter2", Username: "app"})
	defer c.Close()
	s := goredis.New(c).String()
	if strings.Contains(s, "hunter2") || !strings.Contains(s, "127.0.0.1:6379") {
		t.Errorf("String() = %q: must name the address and never the password", s)
	}
}

// TestGoRedisClientKinds: every go-redis client type is accepted as it is.
func TestGoRedisClientKinds(t *testing.T) {
	mr := miniredis.RunT(t)
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": mr.Addr()}})
	var universal redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{mr.Addr()}})
	defer cluster.Close()
	defer ring.Close()
	defer universal.Close()
	for name, c := range map[string]redisclient.Client{
		"cluster":   goredis.New(cluster),
		"ring":      goredis.New(ring),
		"universal": goredis.New(universal),
	} {
		if c == nil || c.String() == "" {
			t.Errorf("%s: adapter %v", name, c)
		}
	}
	// A ring over miniredis runs commands through the adapter.
	ok, err := goredis.New(ring).SetNX(context.Background(), "k", "v")
	if err != nil || !ok {
		t.Errorf("SETNX through a Ring: %v, %v", ok, err)
	}
}
