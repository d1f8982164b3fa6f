package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/registry"
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

// Backend is a Redis backend as the promise matrix runs it.
type Backend struct {
	// N is the number of servers.
	N int
	// TTL is the lock TTL of the cells.
	TTL time.Duration
	// NewLocker builds the backend over one client per server.
	NewLocker func(t *testing.T, clients []redisclient.Client) lockswap.Locker
	// URL, when set, returns the backend's URL over the given hosts,
	// without client= (the matrix adds it); its scheme without the TLS
	// "s". The matrix then opens it in the Open row, and over TLS to
	// plain-text servers in the tls-to-plain fault.
	URL func(hosts []string) string
	// CloseBound, when set, gives the bound of Close per client name
	// where the backend declares more than a second (conformance.Fault).
	CloseBound map[string]time.Duration
}

// RunFaults runs the promise matrix (conformance.RunMatrix) for a Redis
// backend over n servers with no URL (see [RunMatrix]).
func RunFaults(t *testing.T, n int, ttl time.Duration, newLocker func(t *testing.T, clients []redisclient.Client) lockswap.Locker) {
	RunMatrix(t, Backend{N: n, TTL: ttl, NewLocker: newLocker})
}

// RunMatrix runs conformance.RunMatrix for a Redis backend on every
// client of [FaultClients], and logs the five worst overruns measured.
func RunMatrix(t *testing.T, b Backend) {
	var o conformance.Overruns
	t.Cleanup(func() { t.Log(o.Summary(5)) })
	m := conformance.Matrix{TTL: b.TTL, Overruns: &o}
	for _, c := range FaultClients {
		m.Clients = append(m.Clients, conformance.MatrixClient{Name: c.Name, Faults: MatrixFaults(b, c.Name, c.New)})
	}
	conformance.RunMatrix(t, m)
}

// MatrixFaults returns the faults of the promise matrix for backend b over
// the client library named client (a name of [FaultClients]), made by
// newClient: those of [Faults], and every server refusing connections
// ("refused": the listener closed, open connections with it), closing
// every connection as soon as it is made ("reset") and, when b has a
// URL, TLS to servers that speak plain text ("tls-to-plain", opened from
// the URL). With a URL each fault has an Open: the URL over servers
// already failing, opened with registry.OpenURL.
func MatrixFaults(b Backend, client string, newClient NewClient) []conformance.Fault {
	faults := Faults(b.N, newClient, b.NewLocker)
	faults = append(faults,
		conformance.Fault{Name: "refused", NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
			return viaProxies(t, b, newClient, (*testserver.Proxy).Close)
		}},
		conformance.Fault{Name: "reset", NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
			return viaProxies(t, b, newClient, func(p *testserver.Proxy) { p.Partition(true) })
		}},
	)
	for i := range faults {
		faults[i].CloseBound = b.CloseBound[client]
	}
	if b.URL == nil {
		return faults
	}
	proxied := func(fault func(*testserver.Proxy)) func(t *testing.T) []string {
		return func(t *testing.T) []string {
			var hosts []string
			for range b.N {
				p := testserver.ProxyT(t, testserver.RedisT(t, testserver.RedisOptions{}).Addr())
				fault(p)
				hosts = append(hosts, p.Addr())
			}
			return hosts
		}
	}
	hostsOf := map[string]func(t *testing.T) []string{
		"no-reply": proxied(func(p *testserver.Proxy) { p.Blackhole(true) }),
		"slow":     proxied(func(p *testserver.Proxy) { p.SetDelay(10 * time.Second) }),
		"refused":  proxied((*testserver.Proxy).Close),
		"reset":    proxied(func(p *testserver.Proxy) { p.Partition(true) }),
		"paused": func(t *testing.T) []string {
			var hosts []string
			for range b.N {
				srv := testserver.RedisT(t, testserver.RedisOptions{})
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(srv.Resume)
				hosts = append(hosts, srv.Addr())
			}
			return hosts
		},
		"tls-to-plain": func(t *testing.T) []string {
			var hosts []string
			for range b.N {
				hosts = append(hosts, testserver.RedisT(t, testserver.RedisOptions{}).Addr())
			}
			return hosts
		},
	}
	openURL := func(t *testing.T, ctx context.Context, hosts []string, tls bool) (lockswap.Locker, error) {
		return registry.OpenURL(ctx, matrixURL(b.URL(hosts), client, tls))
	}
	faults = append(faults, conformance.Fault{Name: "tls-to-plain", CloseBound: b.CloseBound[client], FromStart: true, NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
		// The cells' Locker dials with a short timeout: rueidis makes its
		// first connection when it is opened, and a handshake the server
		// never answers (it waits for the end of a line that the TLS
		// hello may not have) would cost each cell the default 5 s before
		// its call. The calls' bounds are their contexts'; the Open row
		// opens with the default.
		u := matrixURL(b.URL(hostsOf["tls-to-plain"](t)), client, true) + "&dial_timeout=500ms"
		lk, err := registry.OpenURL(context.Background(), u)
		if err != nil {
			t.Fatalf("OpenURL over TLS to plain-text servers: %v", err)
		}
		return lk, nil
	}})
	for i := range faults {
		hosts, tls := hostsOf[faults[i].Name], faults[i].Name == "tls-to-plain"
		faults[i].Open = func(t *testing.T, ctx context.Context) (lockswap.Locker, error) {
			return openURL(t, ctx, hosts(t), tls)
		}
	}
	return faults
}

// viaProxies builds b over proxies to servers of its own, and returns what
// applies fault to every proxy.
func viaProxies(t *testing.T, b Backend, newClient NewClient, fault func(*testserver.Proxy)) (lockswap.Locker, func()) {
	var clients []redisclient.Client
	var proxies []*testserver.Proxy
	for range b.N {
		p := testserver.ProxyT(t, testserver.RedisT(t, testserver.RedisOptions{}).Addr())
		proxies = append(proxies, p)
		clients = append(clients, newClient(t, p.Addr()))
	}
	return b.NewLocker(t, clients), func() {
		for _, p := range proxies {
			fault(p)
		}
	}
}

// matrixURL adds client= to u (go-redis with its default options is
// client=goredis) and, with tls, the TLS "s" to its scheme.
func matrixURL(u, client string, tls bool) string {
	client = strings.TrimSuffix(client, "-defaults")
	if tls {
		scheme, rest, _ := strings.Cut(u, "://")
		u = scheme + "s://" + rest
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "client=" + client
}
