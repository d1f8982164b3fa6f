package redisclient_test

import (
	"strings"
	"testing"

	"github.com/lockswap/lockswap/redisclient"
)

// TestDurabilityRisks: the settings under which a crash brings a key back
// older (appendfsync other than always; no fsync during rewrites; RDB
// snapshots without the append-only file) or memory pressure evicts a
// key without a TTL (allkeys-* with a memory limit) are named with what
// to set instead; persistence off, appendfsync always (snapshots or not),
// and eviction policies that cannot reach such keys are not.
func TestDurabilityRisks(t *testing.T) {
	aof := redisclient.Durability{AppendOnly: true, AppendFsync: "always", MaxmemoryPolicy: "noeviction", Maxmemory: "0"}
	with := func(f func(*redisclient.Durability)) redisclient.Durability { d := aof; f(&d); return d }
	for _, c := range []struct {
		name string
		d    redisclient.Durability
		want []string // words of the risks; none: no risk
	}{
		{"off", redisclient.Durability{AppendFsync: "everysec", MaxmemoryPolicy: "noeviction", Maxmemory: "0"}, nil},
		{"aof-always", aof, nil},
		{"aof-always-with-snapshots", with(func(d *redisclient.Durability) { d.Save = "3600 1" }), nil},
		{"aof-everysec", with(func(d *redisclient.Durability) { d.AppendFsync = "everysec" }), []string{"appendfsync everysec", "appendfsync always"}},
		{"no-fsync-on-rewrite", with(func(d *redisclient.Durability) { d.NoFsyncOnRewrite = true }), []string{"no-appendfsync-on-rewrite no"}},
		{"snapshots-only", redisclient.Durability{Save: "3600 1 300 100 60 10000", MaxmemoryPolicy: "noeviction", Maxmemory: "0"}, []string{"RDB snapshots", "3600 1 300 100 60 10000"}},
		{"allkeys-no-limit", with(func(d *redisclient.Durability) { d.MaxmemoryPolicy = "allkeys-lru" }), nil},
		{"allkeys-limit", with(func(d *redisclient.Durability) { d.MaxmemoryPolicy, d.Maxmemory = "allkeys-lru", "104857600" }), []string{"allkeys-lru", "noeviction"}},
		{"volatile-limit", with(func(d *redisclient.Durability) { d.MaxmemoryPolicy, d.Maxmemory = "volatile-lru", "104857600" }), nil},
	} {
		risks := strings.Join(c.d.Risks(), "; ")
		if (risks == "") != (c.want == nil) {
			t.Errorf("%s: risks %q, want them to name %q", c.name, risks, c.want)
		}
		for _, w := range c.want {
			if !strings.Contains(risks, w) {
				t.Errorf("%s: risks %q, want %q in them", c.name, risks, w)
			}
		}
	}
}
