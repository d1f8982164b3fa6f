package redlock_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestDurabilityChecked: a fenced or restart-safe Locker with a Logger
// reads each master's persistence and eviction settings at New and warns,
// master by master, about those that let a counter or epoch come back
// older or vanish (appendfsync everysec; RDB snapshots without the
// append-only file; an allkeys-* eviction policy), and once about the
// masters whose settings it cannot read (CONFIG renamed away, as managed
// Redis services do; a master down). Masters with persistence off or
// appendfsync always and noeviction get no record, and New does not fail.
func TestDurabilityChecked(t *testing.T) {
	safe := testserver.RedisT(t, testserver.RedisOptions{})                     // persistence off
	fsynced := testserver.RedisT(t, testserver.RedisOptions{Persistence: true}) // AOF, fsync always
	everysec := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--appendonly", "yes", "--appendfsync", "everysec"}})
	snapshots := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--save", "3600 1", "--maxmemory-policy", "allkeys-lru", "--maxmemory", "100mb"}})
	noConfig := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--rename-command", "CONFIG", ""}})
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d", ports[0])
	for _, opts := range []redlock.Options{{Fence: true}, {RestartSafety: true, MaxTTL: time.Minute}} {
		rec := logtest.New()
		opts.Logger = rec.Logger()
		addrs := []string{safe.Addr(), fsynced.Addr(), everysec.Addr(), snapshots.Addr(), noConfig.Addr(), down}
		newLocker(t, addrs, redistest.GoRedis, opts)
		unknown := rec.Wait(t, redlock.MsgDurabilityUnknown, 10*time.Second)
		for _, a := range []string{noConfig.Addr(), down} {
			if !strings.Contains(unknown.String("instances"), a) {
				t.Errorf("%s names %s, want %s among them", redlock.MsgDurabilityUnknown, unknown.String("instances"), a)
			}
		}
		risks := map[string]string{}
		for _, r := range rec.Find(redlock.MsgDurabilityRisk) {
			risks[r.String("instance")] = r.String("risks")
		}
		want := map[string][]string{
			everysec.Addr():  {"appendfsync everysec"},
			snapshots.Addr(): {"RDB snapshots", "maxmemory-policy allkeys-lru"},
		}
		for addr, r := range risks {
			found := false
			for a, ws := range want {
				if strings.Contains(addr, a) {
					found = true
					for _, w := range ws {
						if !strings.Contains(r, w) {
							t.Errorf("%+v: risks of %s = %q, want %q in them", opts, a, r, w)
						}
					}
				}
			}
			if !found {
				t.Errorf("%+v: a risk recorded for %s (%q), whose settings keep counters", opts, addr, r)
			}
		}
		if len(risks) != len(want) {
			t.Errorf("%+v: risks recorded for %d masters (%v), want %d", opts, len(risks), risks, len(want))
		}
	}
}
