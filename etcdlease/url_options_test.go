package etcdlease

import (
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/optionstest"
)

// TestURLOptions: every field of Options a user sets has a URL parameter
// that sets it, and every parameter sets one (issue 30, "one
// configuration, two forms").
func TestURLOptions(t *testing.T) {
	optionstest.Check(t, Options{}, "etcd", "etcd://127.0.0.1:2379?",
		func(raw string) (any, error) { return URLOptions(raw) },
		[]optionstest.Row{
			{Field: "Prefix", Param: "prefix", Value: "/app/", Want: "/app/"},
			{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
			{Field: "RequestTimeout", Param: "request_timeout", Value: "2s", Want: 2 * time.Second},
			{Field: "ClusterSize", Param: "cluster_size", Value: "3", Want: 3},
			{Field: "LogKeys", Param: "log_keys", Value: "true", Want: true},
		})
	for _, q := range []string{"request_timeout=0s", "request_timeout=-1s", "cluster_size=0", "cluster_size=-3", "cluster_size=x"} {
		if _, err := URLOptions("etcd://127.0.0.1:2379?" + q); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", q, err)
		}
	}
}
