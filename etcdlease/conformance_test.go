package etcdlease

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/testserver"
)

// openT opens a Locker with its own client to endpoints, closed at cleanup.
func openT(t testing.TB, endpoints []string, prefix string) *Locker {
	t.Helper()
	lk, err := Open(Config{Endpoints: endpoints, Prefix: prefix, DialTimeout: 5 * time.Second, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("Open(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// expire stops the holder's keepalive, as if its process had paused: the
// server expires the lease after its granted TTL.
func expire(t *testing.T, holder lockswap.Locker, l lockswap.Lock) {
	t.Helper()
	el, ok := driver.Data[*entry](l)
	if !ok || el == nil {
		t.Fatalf("lock %T is not an etcdlease lock", l)
	}
	el.ls.stopKeepalive()
}

func TestConformance(t *testing.T) {
	srv := testserver.EtcdT(t)
	conformance.Run(t, conformance.Harness{
		NewLocker:  func(t *testing.T) lockswap.Locker { return openT(t, srv.Endpoints(), "conformance/") },
		TTL:        time.Second,
		Expire:     expire,
		Goroutines: []string{"go.etcd.io/etcd/client/v3"},
		NewLockerTTL: func(t *testing.T, ttl time.Duration) (lockswap.Locker, error) {
			lk, err := Open(Config{Endpoints: srv.Endpoints(), Prefix: "conformance/", TTL: ttl})
			if err != nil {
				return nil, err
			}
			return lk, nil
		},
	})
}
