package memlock_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/optionstest"
	"github.com/lockswap/lockswap/memlock"
)

// TestURLOptions: every field of Options a user sets has a URL parameter
// that sets it, and every parameter sets one (issue 30, "one
// configuration, two forms"). store= names the Store, not an option.
func TestURLOptions(t *testing.T) {
	optionstest.Check(t, memlock.Options{}, "memlock", "memlock://?store=options-test",
		func(raw string) (any, error) { return memlock.URLOptions(raw) },
		[]optionstest.Row{
			{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
			{Field: "LogKeys", Param: "log_keys", Value: "true", Want: true},
		})
}
