package singleredis_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/singleredis"
)

// TestFairWaitOnRedisCluster: the fair wait's keys (the lock, its queue,
// its registrations, its fence counter) share a hash slot, so its scripts
// run on Redis Cluster (a script over keys of two slots fails with
// CROSSSLOT), and the wake-up is published through the cluster. A
// one-node cluster that serves every slot, through go-redis's cluster
// client; keys with and without a hash tag of their own.
func TestFairWaitOnRedisCluster(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{Args: []string{
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(t.TempDir(), "nodes.conf")}})
	ctx := context.Background()
	admin := goredislib.NewClient(&goredislib.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); !strings.Contains(admin.ClusterInfo(ctx).Val(), "cluster_state:ok"); {
		if time.Now().After(end) {
			t.Fatal("the one-node cluster did not reach cluster_state:ok")
		}
		time.Sleep(10 * time.Millisecond)
	}
	newLk := func() *singleredis.Locker {
		cc := goredislib.NewClusterClient(&goredislib.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { cc.Close() })
		return fairLocker(t, goredis.New(cc), singleredis.Options{Fence: true})
	}
	a, b := newLk(), newLk()
	for _, key := range []string{"cluster-plain", "{tenant}:cluster-tagged"} {
		for _, k := range []string{singleredis.FairQueueKey(key), singleredis.FairWaitersKey(key), singleredis.FenceKey(key)} {
			want, _ := admin.ClusterKeySlot(ctx, key).Result()
			if got, _ := admin.ClusterKeySlot(ctx, k).Result(); got != want {
				t.Errorf("key %q in slot %d, its lock %q in %d", k, got, key, want)
			}
		}
		held, err := a.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		out := acquireAsync(ctx, b, key, lockswap.WithTTL(5*time.Second))
		waitFor(t, 5*time.Second, "registered", func() bool {
			n, _ := admin.HLen(ctx, singleredis.FairWaitersKey(key)).Result()
			return n == 1
		})
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-out
		if r.err != nil {
			t.Fatalf("%s: the waiter on Redis Cluster: %v", key, r.err)
		}
		if err := r.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
