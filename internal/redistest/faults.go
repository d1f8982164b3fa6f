package redistest

import (
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// GoRedisDefaults returns a go-redis adapter with its own client to addr,
// built with go-redis's default options: ContextTimeoutEnabled is off, so
// the client itself ignores contexts (the adapter must keep deadlines).
func GoRedisDefaults(t testing.TB, addr string) redisclient.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return goredis.New(c)
}

// FaultClients are the clients the fault suite runs with: those of
// [Clients], and go-redis with its default options.
var FaultClients = append(Clients[:len(Clients):len(Clients)], struct {
	Name string
	New  NewClient
}{"goredis-defaults", GoRedisDefaults})

// Faults returns the fault cases of conformance.RunFaults for a Redis
// backend over n servers: every server stops answering (a proxy that
// accepts and holds every byte), is SIGSTOPped, or answers 10 s late.
// newLocker builds the backend over one client per server.
func Faults(n int, newClient NewClient, newLocker func(t *testing.T, clients []redisclient.Client) lockswap.Locker) []conformance.Fault {
	viaProxies := func(t *testing.T, fault func(*testserver.Proxy)) (lockswap.Locker, func()) {
		var clients []redisclient.Client
		var proxies []*testserver.Proxy
		for range n {
			srv := testserver.RedisT(t, testserver.RedisOptions{})
			p := testserver.ProxyT(t, srv.Addr())
			proxies = append(proxies, p)
			clients = append(clients, newClient(t, p.Addr()))
		}
		return newLocker(t, clients), func() {
			for _, p := range proxies {
				fault(p)
			}
		}
	}
	return []conformance.Fault{
		{Name: "no-reply", NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
			return viaProxies(t, func(p *testserver.Proxy) { p.Blackhole(true) })
		}},
		{Name: "slow", NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
			return viaProxies(t, func(p *testserver.Proxy) { p.SetDelay(10 * time.Second) })
		}},
		{Name: "paused", NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
			var clients []redisclient.Client
			var servers []*testserver.Redis
			for range n {
				srv := testserver.RedisT(t, testserver.RedisOptions{})
				servers = append(servers, srv)
				clients = append(clients, newClient(t, srv.Addr()))
			}
			lk := newLocker(t, clients)
			return lk, func() {
				for _, srv := range servers {
					if err := srv.Pause(); err != nil {
						t.Fatal(err)
					}
					// Resume before the server is stopped at cleanup
					// (cleanups run last-in first-out).
					t.Cleanup(srv.Resume)
				}
			}
		}},
	}
}

// RunFaults runs conformance.RunFaults for a Redis backend over n servers
// on every client of [FaultClients] (in parallel), and logs the worst
// overrun measured per client, fault and call.
func RunFaults(t *testing.T, n int, ttl time.Duration, newLocker func(t *testing.T, clients []redisclient.Client) lockswap.Locker) {
	for _, c := range FaultClients {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			var o conformance.Overruns
			t.Cleanup(func() {
				worst := o.Worst()
				names := make([]string, 0, len(worst))
				for k := range worst {
					names = append(names, k)
				}
				sort.Strings(names)
				for _, k := range names {
					t.Logf("worst overrun %s: %v", k, worst[k].Round(time.Millisecond))
				}
			})
			conformance.RunFaults(t, ttl, Faults(n, c.New, newLocker), &o)
		})
	}
}
