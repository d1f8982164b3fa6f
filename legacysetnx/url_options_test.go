package legacysetnx_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/optionstest"
	"github.com/lockswap/lockswap/legacysetnx"
)

// TestURLOptions: every field of Options a user sets has a URL parameter
// that sets it, and every parameter sets one (issue 30, "one
// configuration, two forms"). Clock is a function: no URL carries it.
func TestURLOptions(t *testing.T) {
	optionstest.Check(t, legacysetnx.Options{}, "legacysetnx", "legacysetnx://127.0.0.1:6379?unit=ms",
		func(raw string) (any, error) { return legacysetnx.URLOptions(raw) },
		[]optionstest.Row{
			{Field: "Prefix", Param: "prefix", Value: "lock.", Want: "lock."},
			{Field: "Unit", Param: "unit", Value: "s", Want: legacysetnx.Seconds},
			{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
			{Field: "ServerTime", Param: "server_time", Value: "true", Want: true},
			{Field: "SetRedisExpiry", Param: "redis_expiry", Value: "true", Want: true},
			{Field: "LogKeys", Param: "log_keys", Value: "true", Want: true},
		})
}
