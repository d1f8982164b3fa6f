package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/singleredis"
)

// clusterPrefix is the key prefix of the cluster tests' Lockers.
const clusterPrefix = "test:"

// goRedisCluster returns a go-redis ClusterClient adapter with its own
// connections to c, closed when the test ends.
func goRedisCluster(t testing.TB, c *servers.RedisCluster) redisclient.Client {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: 16})
	t.Cleanup(func() { cc.Close() })
	return goredis.New(cc)
}

// rueidisCluster returns a rueidis adapter with its own cluster client to
// c (rueidis finds the cluster from the seeds), closed when the test ends.
func rueidisCluster(t testing.TB, c *servers.RedisCluster) redisclient.Client {
	rc, err := rueidislib.NewClient(rueidislib.ClientOption{InitAddress: c.Addrs(), DisableRetry: true, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis cluster client: %v", err)
	}
	t.Cleanup(rc.Close)
	return rueidis.New(rc)
}

type clusterClient func(testing.TB, *servers.RedisCluster) redisclient.Client

var clusterClients = []struct {
	name string
	new  clusterClient
}{
	{"goredis", goRedisCluster},
	{"rueidis", rueidisCluster},
}

// fencedLocker returns a fenced Locker with its own client to c.
func fencedLocker(t testing.TB, c *servers.RedisCluster, newClient clusterClient) *singleredis.Locker {
	t.Helper()
	lk, err := singleredis.New(newClient(t, c), singleredis.Options{Prefix: clusterPrefix, Fence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// TestCluster runs singleredis with fencing on a real Redis Cluster (3
// masters with a replica each), with go-redis's ClusterClient and rueidis
// in cluster mode: the conformance suite; the fence counter in the lock
// key's slot; CROSSSLOT refused at once; a slot moved under a held lock
// and waiting acquirers; a failover under a held lock, with and without
// the lock replicated. The failover cases change the cluster's roles, so
// they run last.
func TestCluster(t *testing.T) {
	c := testserver.RedisClusterT(t, servers.RedisClusterOptions{Replicas: 1})

	t.Run("Conformance", func(t *testing.T) {
		for _, cl := range clusterClients {
			t.Run(cl.name, func(t *testing.T) {
				conformance.Run(t, conformance.Harness{
					NewLocker: func(t *testing.T) lockswap.Locker {
						lk, err := singleredis.New(cl.new(t, c), singleredis.Options{Prefix: clusterPrefix, Fence: true})
						if err != nil {
							t.Fatal(err)
						}
						return lk
					},
					// A second, not less: Do's renewal and the suite's
					// sleeps are measured in TTLs, and a busy machine
					// running the race detector delayed a 300 ms TTL's
					// renewals past its validity ("renewal did not
					// succeed").
					TTL: time.Second,
					NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
						lk, err := singleredis.New(cl.new(t, c), singleredis.Options{Prefix: clusterPrefix, Fence: true, TTL: ttl})
						if err != nil {
							return nil, err
						}
						return lk, nil
					},
				})
			})
		}
	})
	t.Run("FenceKeySlot", func(t *testing.T) { testFenceKeySlot(t, c) })
	t.Run("CrossSlot", func(t *testing.T) { testCrossSlot(t, c) })
	t.Run("MoveSlot", func(t *testing.T) { testMoveSlot(t, c) })
	t.Run("Failover", func(t *testing.T) { testFailover(t, c) })
}

// testFenceKeySlot: the fence counter of a lock key, with or without a
// hash tag of its own, is in the lock key's slot, and the fenced acquire
// writes both keys on the master that serves that slot.
func testFenceKeySlot(t *testing.T, c *servers.RedisCluster) {
	ctx := ctxT(t, 10*time.Second)
	for key, tagged := range map[string]bool{"orders": false, "{user:42}:orders": true, "a{b}c": true} {
		k := clusterPrefix + key
		if redisclient.HasHashTag(k) != tagged {
			t.Errorf("HasHashTag(%q) = %v, want %v", k, !tagged, tagged)
		}
		ks, err1 := c.KeySlot(k)
		fs, err2 := c.KeySlot(singleredis.FenceKey(k))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if ks != fs {
			t.Errorf("lock key %q is in slot %d, its fence counter %q in slot %d", k, ks, singleredis.FenceKey(k), fs)
		}
		lk := fencedLocker(t, c, goRedisCluster)
		l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(5*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", key, err)
		}
		m, err := c.MasterOfKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := c.Do(m, "GET", singleredis.FenceKey(k)); err != nil || v != strconv.FormatUint(fenceOf(t, l), 10) {
			t.Errorf("fence counter %q on the slot's master %s = %v, %v; want the lock's fence %d", singleredis.FenceKey(k), m, v, err, fenceOf(t, l))
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release(%q): %v", key, err)
		}
	}
}

// testCrossSlot: a request over keys in two slots is refused by the
// cluster with CROSSSLOT, which lockswap reports as ErrInvalid at once
// (Acquire does not retry it) and which writes nothing. A fenced lock key
// that contains "}" outside a hash tag meets it, as FenceKey documents.
func testCrossSlot(t *testing.T, c *servers.RedisCluster) {
	ctx := ctxT(t, 10*time.Second)
	const key = "a}b" // hashes whole; its fence counter "a}b:fence" does not
	k := clusterPrefix + key
	ks, _ := c.KeySlot(k)
	fs, _ := c.KeySlot(singleredis.FenceKey(k))
	if ks == fs {
		t.Fatalf("%q and %q share slot %d: the case needs two slots", k, singleredis.FenceKey(k), ks)
	}
	// The raw reply through each adapter: go-redis passes the server's;
	// rueidis's cluster builder refuses the keys before sending (it
	// panics), which its adapter returns as the same reply.
	script := redisclient.NewScript(`return redis.call("MSET", KEYS[1], ARGV[1], KEYS[2], ARGV[1])`)
	for name, newClient := range map[string]clusterClient{"goredis": goRedisCluster, "rueidis": rueidisCluster} {
		_, err := newClient(t, c).Run(ctx, script, []string{k, singleredis.FenceKey(k)}, "x")
		if !strings.Contains(fmt.Sprint(err), "CROSSSLOT") || !redisclient.IsPermanent(err) {
			t.Errorf("%s: script over two slots: err = %v, want a permanent CROSSSLOT reply", name, err)
		}
		lk := fencedLocker(t, c, newClient)
		if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "hash slots") {
			t.Errorf("%s: fenced TryAcquire(%q) on a cluster: err = %v, want ErrInvalid naming the hash slots", name, key, err)
		}
		// Acquire would retry an ErrUnavailable until its context or the
		// outage limit ends (and end with ErrUnavailable): ErrInvalid means
		// it gave up at the first answer.
		if _, err := lk.Acquire(ctx, key); !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: fenced Acquire(%q) on a cluster: err = %v, want ErrInvalid at once", name, key, err)
		}
	}
	for _, kk := range []string{k, singleredis.FenceKey(k)} {
		m, err := c.MasterOfKey(kk)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := c.Do(m, "EXISTS", kk); err != nil || v != int64(0) {
			t.Errorf("after the refused acquire, EXISTS %q on %s = %v, %v; want nothing written", kk, m, v, err)
		}
	}
}

// asking returns how many ASKING commands the node at addr has served.
func asking(t *testing.T, c *servers.RedisCluster, addr string) int {
	return infoCount(t, c, addr, "commandstats", "cmdstat_asking:calls=")
}

// infoCount returns the number after field in INFO section of the node
// at addr, 0 when absent.
func infoCount(t *testing.T, c *servers.RedisCluster, addr, section, field string) int {
	t.Helper()
	v, err := c.Do(addr, "INFO", section)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.(string)
	_, rest, ok := strings.Cut(s, field)
	if !ok {
		return 0
	}
	end := strings.IndexAny(rest, ",\r\n")
	if end < 0 {
		end = len(rest)
	}
	n, _ := strconv.Atoi(rest[:end])
	return n
}

// keysInSlot returns which of keys the node at addr holds in slot
// (CLUSTER GETKEYSINSLOT, which answers on an importing node too), in the
// order of keys. Other keys in the slot are left out: other cases' keys
// (fence counters live an hour) may hash to the same slot.
func keysInSlot(t *testing.T, c *servers.RedisCluster, addr string, slot int, keys ...string) []string {
	t.Helper()
	v, err := c.Do(addr, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "100000")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, k := range v.([]any) {
		held[k.(string)] = true
	}
	var out []string
	for _, k := range keys {
		if held[k] {
			out = append(out, k)
		}
	}
	return out
}

// testMoveSlot moves the slot of a held lock to another master while
// acquirers on Lockers of their own wait for it, then moves it back while
// they take turns. The holder's Extend and Release work while the keys
// answer with ASK (the slot is migrating) and MOVED (it has moved); no two
// holders overlap and every fence written is accepted in order; every
// waiter gets the lock.
func testMoveSlot(t *testing.T, c *servers.RedisCluster) {
	for _, cl := range clusterClients {
		t.Run(cl.name, func(t *testing.T) {
			ctx := ctxT(t, 30*time.Second)
			key := "move-" + cl.name
			k := clusterPrefix + key
			slot, err := c.KeySlot(k)
			if err != nil {
				t.Fatal(err)
			}
			from, err := c.MasterOfSlot(slot)
			if err != nil {
				t.Fatal(err)
			}
			masters, err := c.Masters()
			if err != nil {
				t.Fatal(err)
			}
			to := masters[0]
			if to == from {
				to = masters[1]
			}

			var res fenced.Resource
			holder := fencedLocker(t, c, cl.new)
			l, err := holder.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			res.Enter("holder")
			if err := res.Write("holder", fenceOf(t, l)); err != nil {
				t.Fatal(err)
			}

			const waiters, turns = 4, 2
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				acquired int
				errs     []error
			)
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			for i := range waiters {
				lk := fencedLocker(t, c, cl.new)
				name := fmt.Sprintf("waiter %d", i)
				wg.Go(func() {
					for range turns {
						wl, err := lk.Acquire(ctx, key, lockswap.WithTTL(5*time.Second))
						if err != nil {
							fail(fmt.Errorf("%s: Acquire: %w", name, err))
							return
						}
						if !res.Enter(name) {
							fail(fmt.Errorf("%s entered while another holder was inside", name))
						}
						if err := res.Write(name, fenceOf(t, wl)); err != nil {
							fail(err)
						}
						mu.Lock()
						acquired++
						mu.Unlock()
						if err := wl.Extend(ctx, 5*time.Second); err != nil {
							fail(fmt.Errorf("%s: Extend: %w", name, err))
						}
						res.Exit()
						if err := wl.Release(ctx); err != nil {
							fail(fmt.Errorf("%s: Release: %w", name, err))
						}
					}
				})
			}

			askedBefore := asking(t, c, to)
			m, err := c.BeginMove(slot, to)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Extend(ctx, 10*time.Second); err != nil {
				t.Errorf("holder's Extend while the slot is migrating, keys not moved yet: %v", err)
			}
			finished := false
			defer func() {
				if !finished { // leave the cluster usable for the cases after this one
					m.Finish()
				}
			}()
			if err := m.MigrateKeys(); err != nil {
				t.Fatal(err)
			}
			// The keys (lock and fence counter) are on the new master;
			// the old one still owns the slot and answers ASK.
			ours := []string{k, singleredis.FenceKey(k)}
			if got := keysInSlot(t, c, to, slot, ours...); !slices.Equal(got, ours) {
				t.Errorf("after MIGRATE, slot %d on %s holds %q of this case's keys, want %q (the lock and its fence counter)", slot, to, got, ours)
			}
			if err := l.Extend(ctx, 10*time.Second); err != nil {
				t.Errorf("holder's Extend across ASK: %v", err)
			}
			res.Exit()
			if err := l.Release(ctx); err != nil {
				t.Errorf("holder's Release across ASK: %v", err)
			}
			if n := asking(t, c, to); n <= askedBefore {
				t.Errorf("the new master served %d ASKING commands before and %d after: the holder's requests did not go through ASK", askedBefore, n)
			}
			if got, want := keysInSlot(t, c, to, slot, ours...), ours[1:]; !slices.Equal(got, want) {
				t.Errorf("after the holder's Release across ASK, slot %d on %s holds %q of this case's keys, want %q (the fence counter)", slot, to, got, want)
			}
			finished = true
			if err := m.Finish(); err != nil {
				t.Fatal(err)
			}
			// Move it back while the waiters take turns: their requests
			// meet ASK, TRYAGAIN and MOVED.
			if err := c.MoveSlot(slot, from); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			for _, err := range errs {
				t.Error(err)
			}
			st := res.Stats()
			if st.Overlaps != 0 || st.Rejected != 0 {
				t.Errorf("resource saw %d overlapping holders and rejected %d writes as stale, want none", st.Overlaps, st.Rejected)
			}
			if acquired != waiters*turns {
				t.Errorf("waiters acquired %d times, want %d", acquired, waiters*turns)
			}
			t.Logf("slot %d moved %s → %s → %s under a held lock: %d waiters took %d turns, %d fenced writes accepted, none stale; TRYAGAIN replies: %d on %s, %d on %s",
				slot, from, to, from, waiters, acquired, st.Accepted,
				infoCount(t, c, from, "errorstats", "errorstat_TRYAGAIN:count="), from, infoCount(t, c, to, "errorstats", "errorstat_TRYAGAIN:count="), to)
		})
	}
}

// testFailover fails masters over to their replicas under held locks.
// Coordinated (the replica catches up first): the lock survives. With the
// lock not replicated (replication cut, then the replica takes over):
// the lock is lost, as singleredis declares (Guarantees().SurvivesFailover
// is false) — a second Locker acquires while the first lock's Deadline is
// still ahead, and fencing rejects the first holder's late write.
func testFailover(t *testing.T, c *servers.RedisCluster) {
	ctx := ctxT(t, 60*time.Second)
	a := fencedLocker(t, c, goRedisCluster)
	b := fencedLocker(t, c, goRedisCluster)

	t.Run("Coordinated", func(t *testing.T) {
		const key = "failover-coordinated"
		l, err := a.TryAcquire(ctx, key, lockswap.WithTTL(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.MasterOfKey(clusterPrefix + key)
		if err != nil {
			t.Fatal(err)
		}
		nm, err := c.Failover(m, servers.FailoverCoordinated)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(ctx, key); !errors.Is(err, lockswap.ErrHeld) {
			t.Errorf("after a coordinated failover %s → %s, a second TryAcquire: err = %v, want ErrHeld", m, nm, err)
		}
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			t.Errorf("Extend after a coordinated failover: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release after a coordinated failover: %v", err)
		}
		t.Logf("coordinated failover %s → %s under a held lock: the lock survived (second acquirer held off, holder extended and released)", m, nm)
	})

	t.Run("NotReplicated", func(t *testing.T) {
		g := singleredis.Guarantees(true)
		const key = "failover-lost"
		k := clusterPrefix + key
		m, err := c.MasterOfKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CutReplication(m); err != nil {
			t.Fatal(err)
		}
		l, err := a.TryAcquire(ctx, key, lockswap.WithTTL(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		nm, err := c.Failover(m, servers.FailoverTakeover)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := b.TryAcquire(ctx, key, lockswap.WithTTL(20*time.Second))
		if err != nil {
			t.Fatalf("after the replica that never received the lock took over (%s → %s), a second TryAcquire: %v; the arrangement did not lose the lock", m, nm, err)
		}
		left := time.Until(l.Deadline())
		if left <= 0 {
			t.Fatalf("the first lock's deadline passed before the second acquire; the case shows nothing")
		}
		if g.SurvivesFailover {
			t.Errorf("Guarantees().SurvivesFailover is true, but a failover to a replica that lagged gave the lock to a second holder while the first was valid")
		}
		var res fenced.Resource
		if err := res.Write("second", fenceOf(t, l2)); err != nil {
			t.Fatal(err)
		}
		errLate := res.Write("first", fenceOf(t, l))
		if !errors.Is(errLate, fenced.ErrStale) {
			t.Errorf("first holder's late write with fence %d after the second's %d: err = %v, want ErrStale", fenceOf(t, l), fenceOf(t, l2), errLate)
		}
		if err := l.Extend(ctx, 20*time.Second); !errors.Is(err, lockswap.ErrLost) {
			t.Errorf("first holder's Extend after the lock was lost: err = %v, want ErrLost", err)
		}
		if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
			t.Errorf("first holder's Release after the lock was lost: err = %v, want ErrLost", err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Errorf("second holder's Release: %v", err)
		}
		t.Logf("failover %s → %s with the lock not replicated (WAIT-less default): the lock was lost, as declared (SurvivesFailover=%v); a second holder acquired with %s of the first lock's validity left; fences %d then %d, the first holder's late write rejected as stale; its Extend and Release said ErrLost",
			m, nm, g.SurvivesFailover, left.Round(time.Millisecond), fenceOf(t, l), fenceOf(t, l2))
	})
}

// fenceOf returns a fenced lock's fence, failing the test when it has none.
func fenceOf(t testing.TB, l lockswap.Lock) uint64 {
	f, ok := l.Fence()
	if !ok {
		t.Errorf("a fenced Locker's lock has no fence")
	}
	return f
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
