package servers_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/internal/testserver"
)

func clusterClient(t *testing.T, c *servers.RedisCluster) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: time.Second})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestRedisCluster: a 3-master cluster with a replica each serves every
// slot; MoveSlot moves a key's slot with the key; a coordinated failover
// keeps a write; after CutReplication a takeover loses the write the
// replica never received.
func TestRedisCluster(t *testing.T) {
	start := time.Now()
	c := testserver.RedisClusterT(t, servers.RedisClusterOptions{Replicas: 1})
	t.Logf("cluster of %d nodes ready in %s", len(c.Nodes()), time.Since(start))
	ctx := context.Background()
	cc := clusterClient(t, c)

	masters, err := c.Masters()
	if err != nil || len(masters) != 3 {
		t.Fatalf("Masters() = %v, %v; want 3", masters, err)
	}
	// Keys land on every master.
	owners := map[string]bool{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := cc.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		m, err := c.MasterOfKey(k)
		if err != nil {
			t.Fatal(err)
		}
		owners[m] = true
		if v, err := c.Do(m, "GET", k); err != nil || v != "v-"+k {
			t.Fatalf("GET %s on its master %s = %v, %v", k, m, v, err)
		}
	}
	if len(owners) != 3 {
		t.Errorf("8 keys spread over %d masters, want 3", len(owners))
	}

	// Move "a"'s slot to another master.
	slot, err := c.KeySlot("a")
	if err != nil {
		t.Fatal(err)
	}
	from, _ := c.MasterOfSlot(slot)
	to := masters[(slices.Index(masters, from)+1)%3]
	if err := c.MoveSlot(slot, to); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.MasterOfKey("a"); m != to {
		t.Fatalf("after MoveSlot, slot %d is served by %s, want %s", slot, m, to)
	}
	if v, err := c.Do(to, "GET", "a"); err != nil || v != "v-a" {
		t.Fatalf("GET a on the new owner = %v, %v: the key did not move", v, err)
	}
	if v, err := cc.Get(ctx, "a").Result(); err != nil || v != "v-a" {
		t.Fatalf("cluster client GET a after the move = %q, %v", v, err)
	}

	// A coordinated failover keeps what was written.
	bm, _ := c.MasterOfKey("b")
	nb, err := c.Failover(bm, servers.FailoverCoordinated)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := c.MasterOfKey("b"); m != nb || nb == bm {
		t.Fatalf("after failover of %s, b is served by %s, want the promoted replica %s", bm, m, nb)
	}
	if v, err := c.Do(nb, "GET", "b"); err != nil || v != "v-b" {
		t.Fatalf("GET b on the promoted replica = %v, %v", v, err)
	}

	// A write after CutReplication is lost by a takeover.
	cm, _ := c.MasterOfKey("c")
	if err := c.CutReplication(cm); err != nil {
		t.Fatal(err)
	}
	if err := cc.Set(ctx, "c", "after-cut", 0).Err(); err != nil {
		t.Fatal(err)
	}
	nc, err := c.Failover(cm, servers.FailoverTakeover)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Do(nc, "GET", "c"); err != nil || v != "v-c" {
		t.Fatalf("GET c on the promoted replica = %v, %v; want the value from before the cut", v, err)
	}
	t.Logf("whole test %s", time.Since(start))
}
