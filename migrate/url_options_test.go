package migrate_test

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/optionstest"
	_ "github.com/lockswap/lockswap/legacysetnx" // legacysetnx://
	"github.com/lockswap/lockswap/migrate"
	_ "github.com/lockswap/lockswap/redisclient/goredis" // client=goredis, the default
	"github.com/lockswap/lockswap/registry"
	_ "github.com/lockswap/lockswap/singleredis" // singleredis://
)

// TestURLOptions: every field of Options a user sets has a URL parameter
// that sets it, and every parameter sets one (issue 30, "one
// configuration, two forms"). legacy= and target= are URLs that Open
// opens into Options.Legacy and Options.Target.
func TestURLOptions(t *testing.T) {
	base := "migrate://?phase=dual&legacy=" + url.QueryEscape("legacysetnx://127.0.0.1:6379?unit=ms") +
		"&target=" + url.QueryEscape("singleredis://127.0.0.1:6379?fence=true")
	optionstest.Check(t, migrate.Options{}, "migrate", base,
		func(raw string) (any, error) { return migrate.URLOptions(raw) },
		[]optionstest.Row{
			{Field: "Phase", Param: "phase", Value: "target", Want: migrate.PhaseTarget},
			{Field: "Legacy", Param: "legacy"},
			{Field: "Target", Param: "target"},
			{Field: "LegacyNet", Param: "legacy_net", Value: "true", Want: true},
			{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
			{Field: "LogKeys", Param: "log_keys", Value: "true", Want: true},
		})
}

// TestURL: the URL migrate.URL builds opens the phase, the nested URLs
// (percent-encoded whatever they hold) and the parameters it was given.
func TestURL(t *testing.T) {
	legacy := "legacysetnx://127.0.0.1:6379?prefix=lock.&unit=s"
	target := "singleredis://u:p%40ss@127.0.0.1:6380?prefix=locks:&fence=true"
	raw := migrate.URL(migrate.PhaseDual, legacy, target, url.Values{"ttl": {"10s"}, "legacy_net": {"true"}})
	o, err := migrate.URLOptions(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if o.Phase != migrate.PhaseDual || o.TTL != 10*time.Second || !o.LegacyNet {
		t.Errorf("%s: phase %v, ttl %v, legacy_net %v; want dual, 10s, true", raw, o.Phase, o.TTL, o.LegacyNet)
	}
	q, err := url.ParseQuery(strings.TrimPrefix(raw, "migrate://?"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("legacy") != legacy || q.Get("target") != target {
		t.Errorf("%s: legacy=%q target=%q, want %q and %q", raw, q.Get("legacy"), q.Get("target"), legacy, target)
	}
	if raw := migrate.URL(migrate.PhaseLegacy, legacy, "", nil); strings.Contains(raw, "target=") {
		t.Errorf("legacy phase without a target URL: %s has target=", raw)
	} else if _, err := migrate.URLOptions(raw); err != nil {
		t.Errorf("%s: %v", raw, err)
	}
}

// TestURLLogger: a migrate URL opened with a Logger gives it to the
// Locker, which writes MsgLegacyNet with it (the key only with
// log_keys); without one, legacy_net=true still warns on slog's default
// logger.
func TestURLLogger(t *testing.T) {
	raw := migrate.URL(migrate.PhaseTarget, "legacysetnx://127.0.0.1:6379?unit=s", "singleredis://127.0.0.1:6379",
		url.Values{"legacy_net": {"true"}})
	l := slog.New(slog.DiscardHandler)
	o, err := migrate.URLOptionsWith(raw, registry.Clients{Logger: l})
	if err != nil {
		t.Fatal(err)
	}
	if o.Logger != l || o.OnLegacyNet != nil {
		t.Errorf("with a Logger: Options.Logger %p (want %p), OnLegacyNet set %v (want not: the Locker logs)", o.Logger, l, o.OnLegacyNet != nil)
	}
	if o, err = migrate.URLOptions(raw); err != nil || o.OnLegacyNet == nil {
		t.Errorf("without a Logger: OnLegacyNet set %v, err %v; want the default logger's warning", o.OnLegacyNet != nil, err)
	}
}
