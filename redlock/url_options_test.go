package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/optionstest"
	"github.com/lockswap/lockswap/redlock"
)

const threeMasters = "redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003?"

// TestURLOptions: every field of Options a user sets has a URL parameter
// that sets it, and every parameter sets one (issue 30, "one
// configuration, two forms").
func TestURLOptions(t *testing.T) {
	optionstest.Check(t, redlock.Options{}, "redlock", threeMasters+"max_ttl=1m",
		func(raw string) (any, error) { return redlock.URLOptions(raw) },
		[]optionstest.Row{
			{Field: "Prefix", Param: "prefix", Value: "app:", Want: "app:"},
			{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
			{Field: "InstanceTimeout", Param: "instance_timeout", Value: "40ms", Want: 40 * time.Millisecond},
			{Field: "DriftFactor", Param: "drift", Value: "0.02", Want: 0.02},
			{Field: "DriftFixed", Param: "drift_fixed", Value: "5ms", Want: 5 * time.Millisecond},
			{Field: "MaxExtensions", Param: "max_extensions", Value: "7", Want: 7},
			{Field: "MaxHold", Param: "max_hold", Value: "1h", Want: time.Hour},
			{Field: "RestartSafety", Param: "restart_safety", Value: "true", Want: true},
			{Field: "Fence", Param: "fence", Value: "true", Want: true},
			{Field: "MaxTTL", Param: "max_ttl", Value: "2m", Want: 2 * time.Minute},
			{Field: "Failovers", Param: "failovers", Value: "1", Want: 1},
			{Field: "MasterNames", Param: "master_names", Value: "a,b,c", Want: []string{"a", "b", "c"}},
			{Field: "LogKeys", Param: "log_keys", Value: "true", Want: true},
		})
}

// TestURLOptionsSpecialValues: the URL's spellings of what Options says
// with a sign, and the values the new parameters refuse before anything
// is dialed.
func TestURLOptionsSpecialValues(t *testing.T) {
	for _, c := range []struct {
		query string
		field func(redlock.Options) any
		want  any
	}{
		{"drift_fixed=0", func(o redlock.Options) any { return o.DriftFixed < 0 }, true}, // none
		{"drift_fixed=0s", func(o redlock.Options) any { return o.DriftFixed < 0 }, true},
		{"max_extensions=-1", func(o redlock.Options) any { return o.MaxExtensions }, -1}, // no bound
	} {
		o, err := redlock.URLOptions(threeMasters + c.query)
		if err != nil {
			t.Errorf("%s: %v", c.query, err)
			continue
		}
		if got := c.field(o); got != c.want {
			t.Errorf("%s: got %v, want %v", c.query, got, c.want)
		}
	}
	for _, q := range []string{
		"drift_fixed=-1ms", "drift_fixed=8761h", "drift_fixed=x",
		"instance_timeout=0s", "instance_timeout=-5ms", "instance_timeout=8761h",
		"max_extensions=0", "max_extensions=1.5",
		"max_hold=0s", "max_hold=-1s",
		"instance_timeout=1s&ttl=1s",                                  // no validity left: New would refuse it only after dialing
		"master_names=a,b", "master_names=a,b,a", "master_names=a,,c", // one name per host, each once
	} {
		_, err := redlock.URLOptions(threeMasters + q)
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", q, err)
		}
	}
}
