package singleredis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestDurabilityChecked: a fenced Locker with a Logger warns at New about
// a server whose settings let a crash bring a fence counter back older
// (snapshots without the append-only file) or evict it, and about one
// whose settings it cannot read (CONFIG renamed away); an unfenced
// Locker, and a fenced one on a server that keeps its counters, write
// nothing about them.
func TestDurabilityChecked(t *testing.T) {
	risky := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--save", "60 1", "--maxmemory-policy", "allkeys-lfu", "--maxmemory", "100mb"}})
	noConfig := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--rename-command", "CONFIG", ""}})
	fsynced := testserver.RedisT(t, testserver.RedisOptions{Persistence: true})
	for _, c := range []struct {
		name  string
		addr  string
		fence bool
		want  string   // the message expected, "" for none
		words []string // in its risks
	}{
		{"risky", risky.Addr(), true, singleredis.MsgDurabilityRisk, []string{"RDB snapshots", "allkeys-lfu"}},
		{"no-config", noConfig.Addr(), true, singleredis.MsgDurabilityUnknown, nil},
		{"fsynced", fsynced.Addr(), true, "", nil},
		{"unfenced", risky.Addr(), false, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := logtest.New()
			lk, err := singleredis.New(redistest.GoRedis(t, c.addr), singleredis.Options{Fence: c.fence, Logger: rec.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			if c.want != "" {
				r := rec.Wait(t, c.want, 10*time.Second)
				for _, w := range c.words {
					if !strings.Contains(r.String("risks"), w) {
						t.Errorf("risks = %q, want %q in them", r.String("risks"), w)
					}
				}
			}
			// Close waits for the check: after it, every record it made
			// is in.
			lk.Close()
			for _, m := range []string{singleredis.MsgDurabilityRisk, singleredis.MsgDurabilityUnknown} {
				if n := len(rec.Find(m)); m != c.want && n != 0 || m == c.want && n != 1 {
					t.Errorf("%d records %q, want %d", n, m, map[bool]int{true: 1}[m == c.want])
				}
			}
		})
	}
}
