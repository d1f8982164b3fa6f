package soak_test

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/soak"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestMain makes the test binary a hog when the soak re-executes it as
// one (the default Options.HogCommand re-executes os.Executable()).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == soak.HogCommand {
		soak.Hog(context.Background(), os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConfigs: the matrix of issue 27, each name once, every Redis
// configuration with every client.
func TestConfigs(t *testing.T) {
	all := soak.Configs()
	// The floor; redlock 3 and 5, fenced and not, two TTLs; singleredis
	// plain, fenced, fair wait; legacysetnx: each × 3 clients; etcd.
	if want := (1+2*2*2+3+1)*len(soak.Clients) + 1; len(all) != want {
		t.Errorf("%d configurations, want %d", len(all), want)
	}
	seen := map[string]bool{}
	for _, c := range all {
		if seen[c.Name()] {
			t.Errorf("configuration %s twice", c.Name())
		}
		seen[c.Name()] = true
	}
	for _, name := range []string{"floor/1s/goredis", "floor/1s/redigo", "floor/1s/rueidis", "redlock5+fence/300ms/rueidis", "redlock3/1s/redigo", "singleredis+fairwait/1s/goredis", "legacysetnx/1s/rueidis", "etcdlease/1s"} {
		if !seen[name] {
			t.Errorf("no configuration %s", name)
		}
	}
	got, err := soak.Select(all, []string{"singleredis*", "*/300ms/rueidis"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name())
	}
	want := []string{"redlock3/300ms/rueidis", "redlock3+fence/300ms/rueidis", "redlock5/300ms/rueidis", "redlock5+fence/300ms/rueidis",
		"singleredis/1s/goredis", "singleredis/1s/redigo", "singleredis/1s/rueidis",
		"singleredis+fence/1s/goredis", "singleredis+fence/1s/redigo", "singleredis+fence/1s/rueidis",
		"singleredis+fairwait/1s/goredis", "singleredis+fairwait/1s/redigo", "singleredis+fairwait/1s/rueidis"}
	if !slices.Equal(names, want) {
		t.Errorf("Select = %v, want %v", names, want)
	}
	if _, err := soak.Select(all, []string{"nope*"}); err == nil {
		t.Error("a pattern that matches nothing was accepted")
	}
}

// TestSoak runs two configurations for a moment, idle and beside the
// hogs, on servers of its own, with a key left on purpose in each: the
// report fills every field and finds exactly the planted keys, the fence
// counters apart; the hogs are gone afterwards.
func TestSoak(t *testing.T) {
	rs := testserver.RedisT(t, testserver.RedisOptions{})
	et := testserver.EtcdT(t)
	ctx := context.Background()
	configs, err := soak.Select(soak.Configs(), []string{"floor/1s/rueidis", "singleredis+fence/1s/rueidis", "etcdlease"})
	if err != nil {
		t.Fatal(err)
	}
	o := soak.Options{Configs: configs, Duration: 300 * time.Millisecond, Prefix: "soaktest:",
		RedisAddrs: []string{rs.Addr()}, EtcdEndpoints: et.Endpoints()}

	// The planted keys: one without expiry in Redis (the idle run's
	// prefix), one on a lease in etcd (the hogs run's).
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rc.Close()
	redisPlanted := configs[1].KeyPrefix(o.Prefix, soak.Idle) + "planted"
	if err := rc.Set(ctx, redisPlanted, "left on purpose", 0).Err(); err != nil {
		t.Fatal(err)
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: et.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	lease, err := ec.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	etcdPlanted := configs[2].KeyPrefix(o.Prefix, soak.Hogs) + "planted"
	if _, err := ec.Put(ctx, etcdPlanted, "left on purpose", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}

	rep, err := soak.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 6 {
		t.Fatalf("%d results, want 3 configurations × 2 loads", len(rep.Results))
	}
	for _, r := range rep.Results {
		name := r.Config.Name() + " " + string(r.Load)
		if r.Err != "" {
			t.Errorf("%s: %s", name, r.Err)
		}
		if r.Cycles == 0 || r.Elapsed <= 0 || r.PerSec() <= 0 {
			t.Errorf("%s: cycles %d in %v: want some", name, r.Cycles, r.Elapsed)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors (%d on release): %v", name, r.Errors, r.ReleaseErrors, r.Messages)
		}
		if r.LoadAvg == "" && fileExists("/proc/loadavg") {
			t.Errorf("%s: no load average", name)
		}
		if r.CPU != 0 {
			t.Errorf("%s: CPU %v measured on given servers, whose processes the soak cannot see", name, r.CPU)
		}
		if r.Config.Backend == soak.FloorBackend {
			if r.Left.LockKeys != 0 || r.Left.NoExpiry != 0 {
				t.Errorf("%s: the floor left %d lock keys: %v", name, r.Left.LockKeys, r.Left.Sample)
			}
			continue
		}
		planted := ""
		switch {
		case r.Config.Servers > 0 && r.Load == soak.Idle:
			planted = redisPlanted
		case r.Config.Servers == 0 && r.Load == soak.Hogs:
			planted = etcdPlanted
		}
		if planted == "" {
			if r.Left.LockKeys != 0 {
				t.Errorf("%s: %d lock keys left: %v", name, r.Left.LockKeys, r.Left.Sample)
			}
		} else if r.Left.LockKeys != 1 || len(r.Left.Sample) != 1 || !strings.Contains(r.Left.Sample[0], planted) {
			t.Errorf("%s: lock keys left %d %v, want the planted %s", name, r.Left.LockKeys, r.Left.Sample, planted)
		}
		if r.Config.Servers > 0 {
			// The fenced configuration keeps a counter per key it used:
			// reported apart, not as lock keys.
			if r.Left.FenceCounters == 0 {
				t.Errorf("%s: no fence counters found", name)
			}
			if wantNoExpiry := planted != ""; (r.Left.NoExpiry == 1) != wantNoExpiry {
				t.Errorf("%s: %d keys left without expiry", name, r.Left.NoExpiry)
			}
		}
		if r.Load == soak.Hogs {
			if len(r.HogPIDs) != soak.DefaultHogs {
				t.Errorf("%s: hogs %v, want %d", name, r.HogPIDs, soak.DefaultHogs)
			}
			for _, pid := range r.HogPIDs {
				// Stopped by PID and waited for: the PID names no process
				// (it could be reused, but not this soon in practice).
				if gone, err := processGone(pid); !gone {
					t.Errorf("%s: hog %d still there after the run (kill -0: %v)", name, pid, err)
				}
			}
		} else if len(r.HogPIDs) != 0 {
			t.Errorf("%s: hogs %v in an idle run", name, r.HogPIDs)
		}
	}
	for _, c := range configs {
		if _, ok := rep.Ratio(c); !ok {
			t.Errorf("%s: no ratio", c.Name())
		}
		want, wantOK := rep.Ratio(configs[0])
		if c.Client == "" {
			want, wantOK = 0, false
		}
		if floor, ok := rep.FloorRatio(c); ok != wantOK || floor != want {
			t.Errorf("%s: floor ratio %v %v, want %v %v (the floor's; none for etcd)", c.Name(), floor, ok, want, wantOK)
		}
		if c.Backend == soak.FloorBackend {
			continue
		}
		if rep.Met(c) {
			t.Errorf("%s met the target with a planted key left", c.Name())
		}
	}
	var out bytes.Buffer
	if err := soak.Write(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"singleredis+fence/1s/rueidis", "etcdlease/1s", "LOCK KEYS LEFT", "FENCE COUNTERS", "RATIO",
		"FLOOR RATIO", "MISSED: 1 keys left", "left: " + redisPlanted, "(no expiry)", "left: " + etcdPlanted, "floor, not judged",
		"0 of 2 configurations met the target (1 floor, not judged); missed: singleredis+fence/1s/rueidis, etcdlease/1s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out.String())
	}
}

// TestSoakTooFewServers: a soak given fewer Redis servers than its
// configurations need fails with an error that says so (it panicked
// while cleaning up what it had set up).
func TestSoakTooFewServers(t *testing.T) {
	rs := testserver.RedisT(t, testserver.RedisOptions{})
	configs, err := soak.Select(soak.Configs(), []string{"redlock5/1s/goredis"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := soak.Run(context.Background(), soak.Options{Configs: configs, RedisAddrs: []string{rs.Addr()}, Duration: time.Millisecond})
	if rep != nil || err == nil || !strings.Contains(err.Error(), "need 5 Redis servers, 1 given") {
		t.Errorf("Run with 1 of 5 servers = (%v, %v), want an error saying 5 are needed", rep, err)
	}
}

// TestSoakCPU: on servers it starts itself, the soak measures the CPU
// time of its process and the redis-servers, per cycle, where /proc is.
func TestSoakCPU(t *testing.T) {
	if !fileExists("/proc/self/stat") {
		t.Skip("no /proc: the soak does not measure CPU here")
	}
	testserver.NeedRedisServer(t)
	configs, err := soak.Select(soak.Configs(), []string{"floor/1s/goredis", "singleredis/1s/redigo"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := soak.Run(context.Background(), soak.Options{Configs: configs, Loads: []soak.Load{soak.Idle}, Duration: 300 * time.Millisecond, Prefix: "soakcpu:"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		// A cycle is two round trips to a server on this machine: it
		// costs some CPU, and less than the run's whole time on 2 ×
		// GOMAXPROCS processors.
		if r.Cycles == 0 || r.CPU <= 0 || r.CPUPerCycle() <= 0 || r.CPU > 2*time.Duration(runtime.NumCPU())*r.Elapsed {
			t.Errorf("%s: %d cycles, CPU %v (%v per cycle) in %v", r.Config.Name(), r.Cycles, r.CPU, r.CPUPerCycle(), r.Elapsed)
		}
	}
	var out bytes.Buffer
	if err := soak.Write(&out, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "µs") {
		t.Errorf("report lacks the CPU per cycle:\n%s", out.String())
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
