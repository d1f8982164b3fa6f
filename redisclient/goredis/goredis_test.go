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

// TestGuardedClients: the adapter keeps a request's deadline itself (and
// says so, CostNote) exactly for the clients that do not keep a
// context's deadline on their sockets: without ContextTimeoutEnabled,
// with a ReadTimeout or WriteTimeout of -2 (no socket deadline at all;
// -1 means the context's alone) on every client type, with a timeout
// of -1 kept as given by WithTimeout (no deadline either), and a client
// whose options the adapter cannot read. The note names the cause.
func TestGuardedClients(t *testing.T) {
	const addr = "127.0.0.1:1" // never dialled
	client := func(o redis.Options) redis.Cmdable {
		o.Addr = addr
		c := redis.NewClient(&o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	cluster := func(o redis.ClusterOptions) redis.Cmdable {
		o.Addrs = []string{addr}
		c := redis.NewClusterClient(&o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	ring := func(o redis.RingOptions) redis.Cmdable {
		o.Addrs = map[string]string{"a": addr}
		c := redis.NewRing(&o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	withTimeout := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { withTimeout.Close() })
	for _, tc := range []struct {
		name  string
		c     redis.Cmdable
		cause string // in the note; "" for none
	}{
		{"client/defaults", client(redis.Options{}), "ignores contexts without"},
		{"client/context", client(redis.Options{ContextTimeoutEnabled: true}), ""},
		{"client/context-read-1", client(redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1}), ""},
		{"client/context-read-2", client(redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2}), "sets no socket deadline"},
		{"client/context-write-2", client(redis.Options{ContextTimeoutEnabled: true, WriteTimeout: -2}), "sets no socket deadline"},
		{"client/with-timeout-1", withTimeout.WithTimeout(-1), "sets no socket deadline"},
		{"cluster/defaults", cluster(redis.ClusterOptions{}), "ignores contexts without"},
		{"cluster/context", cluster(redis.ClusterOptions{ContextTimeoutEnabled: true}), ""},
		{"cluster/context-read-1", cluster(redis.ClusterOptions{ContextTimeoutEnabled: true, ReadTimeout: -1}), ""},
		{"cluster/context-read-2", cluster(redis.ClusterOptions{ContextTimeoutEnabled: true, ReadTimeout: -2}), "sets no socket deadline"},
		{"ring/defaults", ring(redis.RingOptions{}), "ignores contexts without"},
		{"ring/context", ring(redis.RingOptions{ContextTimeoutEnabled: true}), ""},
		{"ring/context-read-1", ring(redis.RingOptions{ContextTimeoutEnabled: true, ReadTimeout: -1}), ""},
		{"ring/context-write-2", ring(redis.RingOptions{ContextTimeoutEnabled: true, WriteTimeout: -2}), "sets no socket deadline"},
		{"opaque", opaqueClient{client(redis.Options{ContextTimeoutEnabled: true}).(*redis.Client)}, "cannot read"},
	} {
		note := goredis.New(tc.c).(redisclient.CostNoter).CostNote()
		switch {
		case tc.cause == "" && note != "":
			t.Errorf("%s: noted %q, want no cost", tc.name, note)
		case tc.cause != "" && !strings.Contains(note, tc.cause):
			t.Errorf("%s: noted %q, want a cost naming %q", tc.name, note, tc.cause)
		}
	}
}

// opaqueClient hides a go-redis client's type from the adapter, as a
// program's own wrapper would: the adapter cannot read its options.
type opaqueClient struct{ redis.UniversalClient }
