package backend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
)

const (
	envLegacy = "legacysetnx://127.0.0.1:6379?prefix=lock.&unit=s"
	envTarget = "singleredis://127.0.0.1:6379?prefix=locks:&fence=true"
)

// TestEnvURL: LOCKSWAP_URL alone gives its URL; the migration's variables
// give the migrate URL of their phase over their two URLs, and win over
// LOCKSWAP_URL; a rollout changes the phase variable only (issue 30).
func TestEnvURL(t *testing.T) {
	t.Run("url", func(t *testing.T) {
		t.Setenv("LOCKSWAP_URL", envTarget)
		raw, from, err := backend.EnvURL("")
		if err != nil || raw != envTarget || from != "LOCKSWAP_URL" {
			t.Errorf("EnvURL = %q, %q, %v; want %q from LOCKSWAP_URL", raw, from, err, envTarget)
		}
	})
	t.Run("migration", func(t *testing.T) {
		t.Setenv("LOCKSWAP_URL", envTarget) // the URL before or after: the phase wins
		t.Setenv("LOCKSWAP_LEGACY_URL", envLegacy)
		t.Setenv("LOCKSWAP_TARGET_URL", envTarget)
		t.Setenv("LOCKSWAP_MIGRATE_PARAMS", "ttl=10s&legacy_net=true")
		for _, phase := range []string{"dual", "target", "legacy"} {
			t.Setenv("LOCKSWAP_MIGRATE_PHASE", phase)
			raw, from, err := backend.EnvURL("")
			if err != nil || !strings.HasPrefix(from, "LOCKSWAP_MIGRATE_PHASE") {
				t.Fatalf("phase %s: EnvURL = %q, %q, %v; want a URL from LOCKSWAP_MIGRATE_PHASE", phase, raw, from, err)
			}
			c, err := backend.ParseURL(raw)
			if err != nil {
				t.Fatalf("phase %s: %s: %v", phase, raw, err)
			}
			if c.Backend != backend.Migrate || c.Phase != phase || time.Duration(c.TTL) != 10*time.Second || !c.LegacyNet {
				t.Errorf("phase %s: %s parses to %s", phase, raw, c)
			}
			if c.Legacy == nil || c.Legacy.Prefix != "lock." || c.Legacy.Unit != "s" {
				t.Errorf("phase %s: legacy %v, want %s", phase, c.Legacy, envLegacy)
			}
			if c.Target == nil || c.Target.Prefix != "locks:" || !c.Target.Fence {
				t.Errorf("phase %s: target %v, want %s", phase, c.Target, envTarget)
			}
		}
	})
	t.Run("own name", func(t *testing.T) {
		t.Setenv("APP_LOCKS_MIGRATE_PHASE", "dual")
		t.Setenv("APP_LOCKS_LEGACY_URL", envLegacy)
		t.Setenv("APP_LOCKS_TARGET_URL", envTarget)
		if got := backend.MigrateEnvOf("APP_LOCKS_URL"); got != backend.MigrateEnvOf("APP_LOCKS") {
			t.Errorf("MigrateEnvOf(APP_LOCKS_URL) = %+v, want that of APP_LOCKS", got)
		}
		raw, from, err := backend.EnvURL("APP_LOCKS_URL")
		if err != nil || !strings.HasPrefix(from, "APP_LOCKS_MIGRATE_PHASE") || !strings.HasPrefix(raw, "migrate://") {
			t.Errorf("EnvURL(APP_LOCKS_URL) = %q, %q, %v; want a migrate URL from APP_LOCKS_MIGRATE_PHASE", raw, from, err)
		}
	})
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // in the error
	}{
		{"nothing set", nil, "LOCKSWAP_MIGRATE_PHASE"},
		{"unknown phase", map[string]string{"LOCKSWAP_MIGRATE_PHASE": "half", "LOCKSWAP_LEGACY_URL": envLegacy, "LOCKSWAP_TARGET_URL": envTarget}, "LOCKSWAP_MIGRATE_PHASE"},
		{"dual without target", map[string]string{"LOCKSWAP_MIGRATE_PHASE": "dual", "LOCKSWAP_LEGACY_URL": envLegacy}, "LOCKSWAP_TARGET_URL"},
		{"dual without legacy", map[string]string{"LOCKSWAP_MIGRATE_PHASE": "dual", "LOCKSWAP_TARGET_URL": envTarget}, "LOCKSWAP_LEGACY_URL"},
		{"target with the safety net without legacy", map[string]string{"LOCKSWAP_MIGRATE_PHASE": "target", "LOCKSWAP_TARGET_URL": envTarget, "LOCKSWAP_MIGRATE_PARAMS": "legacy_net=true"}, "LOCKSWAP_LEGACY_URL"},
		{"phase in params", map[string]string{"LOCKSWAP_MIGRATE_PHASE": "dual", "LOCKSWAP_LEGACY_URL": envLegacy, "LOCKSWAP_TARGET_URL": envTarget, "LOCKSWAP_MIGRATE_PARAMS": "phase=legacy"}, "LOCKSWAP_MIGRATE_PARAMS"},
		{"bad params", map[string]string{"LOCKSWAP_MIGRATE_PHASE": "dual", "LOCKSWAP_LEGACY_URL": envLegacy, "LOCKSWAP_TARGET_URL": envTarget, "LOCKSWAP_MIGRATE_PARAMS": "ttl=1s;x"}, "LOCKSWAP_MIGRATE_PARAMS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []string{"LOCKSWAP_URL", "LOCKSWAP_MIGRATE_PHASE", "LOCKSWAP_LEGACY_URL", "LOCKSWAP_TARGET_URL", "LOCKSWAP_MIGRATE_PARAMS"} {
				t.Setenv(v, c.env[v])
			}
			_, _, err := backend.EnvURL("")
			if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("EnvURL: %v; want ErrInvalid naming %s", err, c.want)
			}
		})
	}
}
