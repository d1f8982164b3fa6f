package singleredis_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/optionstest"
	"github.com/lockswap/lockswap/singleredis"
)

// TestURLOptions: every field of Options a user sets has a URL parameter
// that sets it, and every parameter sets one (issue 30, "one
// configuration, two forms").
func TestURLOptions(t *testing.T) {
	optionstest.Check(t, singleredis.Options{}, "singleredis", "singleredis://127.0.0.1:6379?",
		func(raw string) (any, error) { return singleredis.URLOptions(raw) },
		[]optionstest.Row{
			{Field: "Prefix", Param: "prefix", Value: "app:", Want: "app:"},
			{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
			{Field: "Fence", Param: "fence", Value: "true", Want: true},
			{Field: "FairWait", Param: "fair_wait", Value: "true", Want: true},
			{Field: "LogKeys", Param: "log_keys", Value: "true", Want: true},
		})
}
