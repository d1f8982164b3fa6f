package etcdlease

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
)

// oldestServer is the oldest etcd server version etcdlease supports (and
// docs/etcdlease.md claims): Debian's etcd-server package.
const oldestServer = "3.4"

// TestConformanceOldestServer runs the conformance suite against the etcd
// program on PATH, which CI installs from Debian (etcd-server, 3.4): the
// oldest server version claimed. The embedded server the other tests use
// is the newest.
func TestConformanceOldestServer(t *testing.T) {
	srv := testserver.EtcdBinaryT(t)
	t.Logf("etcd server %s", srv.Version())
	if !atLeast(srv.Version(), oldestServer) {
		t.Fatalf("the etcd on PATH is %s, older than the oldest supported %s", srv.Version(), oldestServer)
	}
	conformance.Run(t, conformance.Harness{
		NewLocker:  func(t *testing.T) lockswap.Locker { return openT(t, srv.Endpoints(), "oldest/") },
		TTL:        time.Second,
		Expire:     expire,
		Goroutines: []string{"go.etcd.io/etcd/client/v3"},
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "oldest/", TTL: ttl})
			if err != nil {
				return nil, err // not a typed nil Locker
			}
			return lk, nil
		},
	})
}

// atLeast reports whether version v ("3.4.23") is at least min ("3.4").
func atLeast(v, min string) bool {
	vs, ms := strings.Split(v, "."), strings.Split(min, ".")
	for i, m := range ms {
		if i >= len(vs) {
			return false
		}
		a, err1 := strconv.Atoi(vs[i])
		b, err2 := strconv.Atoi(m)
		if err1 != nil || err2 != nil {
			return false
		}
		if a != b {
			return a > b
		}
	}
	return true
}
