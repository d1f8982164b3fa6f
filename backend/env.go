package backend

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/lockswap/lockswap/migrate"
)

// MigrateEnv are the names of the environment variables of a migration
// for the variable name (EnvVar when empty): name without its "_URL"
// suffix, then _MIGRATE_PHASE, _LEGACY_URL, _TARGET_URL and
// _MIGRATE_PARAMS. For LOCKSWAP_URL they are LOCKSWAP_MIGRATE_PHASE,
// LOCKSWAP_LEGACY_URL, LOCKSWAP_TARGET_URL and LOCKSWAP_MIGRATE_PARAMS.
type MigrateEnv struct {
	// Phase holds the phase: legacy, dual or target. A rollout changes
	// this one value.
	Phase string
	// Legacy and Target hold the legacysetnx URL and the target backend's
	// URL, as they are, not percent-encoded.
	Legacy, Target string
	// Params holds more parameters of the migrate URL, as a query string
	// such as "ttl=10s&legacy_net=true" (optional).
	Params string
}

// MigrateEnvOf returns the names of the migration's variables for name.
func MigrateEnvOf(name string) MigrateEnv {
	if name == "" {
		name = EnvVar
	}
	stem := strings.TrimSuffix(name, "_URL")
	return MigrateEnv{Phase: stem + "_MIGRATE_PHASE", Legacy: stem + "_LEGACY_URL",
		Target: stem + "_TARGET_URL", Params: stem + "_MIGRATE_PARAMS"}
}

// EnvURL returns the backend URL the environment gives under name (EnvVar
// when empty), and the variable it came from, for messages. When the
// migration's phase variable (MigrateEnvOf(name).Phase) is set, the URL is
// the migrate URL of that phase over the legacy and target URLs of its
// variables (migrate.URL), whatever name holds: name keeps the URL from
// before or after the migration, and a rollout sets or changes the phase.
// Otherwise it is the URL in name. An unset variable that is needed, or a
// malformed MIGRATE_PARAMS (or one with phase, legacy or target, which
// have variables of their own), is an error matching lockswap.ErrInvalid.
func EnvURL(name string) (raw, from string, err error) {
	if name == "" {
		name = EnvVar
	}
	m := MigrateEnvOf(name)
	if phase := os.Getenv(m.Phase); phase != "" {
		p, err := migrate.ParsePhase(phase)
		if err != nil {
			return "", "", fmt.Errorf("%s: %w", m.Phase, err)
		}
		params, err := url.ParseQuery(os.Getenv(m.Params))
		if err != nil {
			return "", "", invalid("%s is not a query string such as ttl=10s&legacy_net=true", m.Params)
		}
		for _, k := range []string{"phase", "legacy", "target"} {
			if params.Has(k) {
				return "", "", invalid("%s has %s=: give it in %s", m.Params, k, map[string]string{"phase": m.Phase, "legacy": m.Legacy, "target": m.Target}[k])
			}
		}
		legacyNet, _ := strconv.ParseBool(params.Get("legacy_net"))
		legacy, target := os.Getenv(m.Legacy), os.Getenv(m.Target)
		switch {
		case (p != migrate.PhaseTarget || legacyNet) && legacy == "":
			return "", "", invalid("%s=%s needs %s, the legacysetnx URL", m.Phase, p, m.Legacy)
		case p != migrate.PhaseLegacy && target == "":
			return "", "", invalid("%s=%s needs %s, the target backend's URL", m.Phase, p, m.Target)
		}
		return migrate.URL(p, legacy, target, params), fmt.Sprintf("%s (with %s and %s)", m.Phase, m.Legacy, m.Target), nil
	}
	raw, ok := os.LookupEnv(name)
	if !ok || raw == "" {
		return "", "", invalid("environment variable %s is not set; set it to a backend URL such as singleredis://127.0.0.1:6379 (or, to migrate, set %s, %s and %s)",
			name, m.Phase, m.Legacy, m.Target)
	}
	return raw, name, nil
}
