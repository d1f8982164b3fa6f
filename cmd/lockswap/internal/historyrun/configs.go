package historyrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/nemesis"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// Config is one backend configuration a run checks.
type Config struct {
	// Name names it: the backend, "3" or "5" for Redlock's masters, and
	// "+fence" when its register checks fences.
	Name string
	// Servers says what it runs on, for --list.
	Servers string
	start   func() (*env, error)
}

// env is a configuration's running servers: how a client opens its
// Locker, the nemesis's faults, and what stops them.
type env struct {
	// cfg is what each client opens, unless open is set.
	cfg  backend.Config
	open func(ctx context.Context, client int) (lockswap.Locker, error)
	// faults are the servers' faults; the workload adds its holder pauses.
	faults []nemesis.Fault
	stops  []func()
	// keysLeft, on the user's servers, deletes the run's keys and says
	// what it could not delete.
	keysLeft func() error
	// jumpsMatter: the clients take time from the clock the nemesis jumps,
	// so a jump can excuse a lost update (legacysetnx without
	// server_time); elsewhere a jump is no excuse.
	jumpsMatter bool
}

func (e *env) openClient(ctx context.Context, client int) (lockswap.Locker, error) {
	if e.open != nil {
		return e.open(ctx, client)
	}
	return backend.Open(ctx, e.cfg, backend.Clients{})
}

func (e *env) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// redisVia starts a redis-server without persistence and a proxy in
// front of it, and adds them to e, which stops them.
func (e *env) redisVia() (*servers.Redis, *servers.Proxy, error) {
	srv, err := servers.StartRedis(servers.RedisOptions{})
	if err != nil {
		return nil, nil, err
	}
	e.stops = append(e.stops, srv.Stop)
	p, err := e.proxy(srv.Addr())
	return srv, p, err
}

// proxy starts a proxy to addr and adds it to e.
func (e *env) proxy(addr string) (*servers.Proxy, error) {
	p, err := servers.StartProxy(addr)
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, p.Close)
	return p, nil
}

// Configs returns every configuration on servers the run starts:
// singleredis plain and fenced on one redis-server; Redlock fenced,
// restart-safe, over three and five; legacysetnx with the clients'
// clocks (which the nemesis moves) and with the server's; etcdlease on the
// etcd program on PATH (which can be paused) or, without one, an embedded
// etcd (its proxy's faults only). Every server is reached through a proxy
// that delays or cuts off its replies.
func Configs() []Config {
	return []Config{
		{Name: "singleredis", Servers: "one redis-server", start: started(singleRedis(false))},
		{Name: "singleredis+fence", Servers: "one redis-server", start: started(singleRedis(true))},
		{Name: "redlock3+fence", Servers: "three redis-servers (restart_safety, max_ttl=2s)", start: redlockStarted(3)},
		{Name: "redlock5+fence", Servers: "five redis-servers (restart_safety, max_ttl=2s)", start: redlockStarted(5)},
		{Name: "legacysetnx", Servers: "one redis-server; the clients' clocks jump", start: started(legacy(false))},
		{Name: "legacysetnx+server_time", Servers: "one redis-server; the clients' clocks jump", start: started(legacy(true))},
		{Name: "etcdlease+fence", Servers: "etcd on PATH, else embedded etcd", start: etcdLease},
	}
}

// ConfigsOn returns the configurations that run on the user's servers s,
// each reached through a proxy the run starts, with only the faults that
// stay on the clients' side: the proxy's delay and cut, holder pauses, and
// legacysetnx's clock jumps. singleredis and legacysetnx take the first
// --redis server; Redlock (without fences, whose membership key is
// server-wide) takes them all when they are an odd number of at least
// three; etcdlease the --etcd endpoints. Keys go under a random prefix,
// deleted at the end of each configuration.
func ConfigsOn(s userservers.Servers) []Config {
	var cs []Config
	if len(s.Redis) > 0 {
		on := "your --redis server " + s.Redis[0]
		cs = append(cs,
			Config{Name: "singleredis", Servers: on, start: onUsers(s, 1, singleRedis(false))},
			Config{Name: "singleredis+fence", Servers: on, start: onUsers(s, 1, singleRedis(true))},
			Config{Name: "legacysetnx", Servers: on + "; the clients' clocks jump", start: onUsers(s, 1, legacy(false))},
			Config{Name: "legacysetnx+server_time", Servers: on + "; the clients' clocks jump", start: onUsers(s, 1, legacy(true))})
	}
	if n := len(s.Redis); n >= 3 && n%2 == 1 {
		cs = append(cs, Config{Name: fmt.Sprintf("redlock%d", n), Servers: "your --redis servers", start: onUsers(s, n, redlockUsers)})
	}
	if len(s.Etcd) > 0 {
		cs = append(cs, Config{Name: "etcdlease+fence", Servers: "your --etcd endpoints", start: func() (*env, error) {
			e := &env{}
			p, err := e.proxy(hostPort(s.Etcd[0]))
			if err != nil {
				return nil, err
			}
			e.cfg = backend.Config{Backend: "etcdlease", Addrs: []string{p.Addr()}, Prefix: "lockswap-history-" + lockstate.NewToken()[:8] + "/"}
			e.faults = nemesis.ProxyFaults("etcd", p)
			return e, nil
		}})
	}
	return cs
}

// setup fills in e for servers reached at addrs (proxies), with the
// faults of each server those proxies reach; auth logs in; prefix is the
// keys' prefix.
type setup func(e *env, addrs []string, auth userservers.Auth, prefix string) error

// started runs sf on a redis-server the run starts.
func started(sf setup) func() (*env, error) {
	return func() (*env, error) {
		e := &env{}
		srv, p, err := e.redisVia()
		if err == nil {
			e.faults = nemesis.RedisFaults("the server", srv, p)
			err = sf(e, []string{p.Addr()}, userservers.Auth{}, "history:")
		}
		if err != nil {
			e.stop()
			return nil, err
		}
		return e, nil
	}
}

// onUsers runs sf on the first n of the user's Redis servers s, each
// behind a proxy with its client-side faults, under a random prefix whose
// keys are deleted when the configuration ends.
func onUsers(s userservers.Servers, n int, sf setup) func() (*env, error) {
	return func() (*env, error) {
		e := &env{}
		prefix := "lockswap-history-" + lockstate.NewToken()[:8] + ":"
		e.keysLeft = func() error { return deleteKeys(s, n, prefix) }
		var via []string
		for i, a := range s.Redis[:n] {
			p, err := e.proxy(a)
			if err != nil {
				e.stop()
				return nil, err
			}
			via = append(via, p.Addr())
			e.faults = append(e.faults, nemesis.ProxyFaults(fmt.Sprintf("server %d", i+1), p)...)
		}
		if err := sf(e, via, s.Auth, prefix); err != nil {
			e.stop()
			return nil, err
		}
		return e, nil
	}
}

// Keys are the lock names every run takes.
var Keys = []string{"a", "b"}

// deleteKeys deletes, on the first n of the user's servers s, every key a
// run under prefix can write: each lock's key and the fence counter beside
// it (singleredis.FenceKey, redlock.FenceKey: the same name). The run
// knows its keys, so nothing scans the user's keyspace. The error names
// the keys left.
func deleteKeys(s userservers.Servers, n int, prefix string) error {
	var names []string
	for _, k := range Keys {
		names = append(names, prefix+k, singleredis.FenceKey(prefix+k))
	}
	if err := (userservers.Servers{Redis: s.Redis[:n], Auth: s.Auth}).DeleteKeys(names); err != nil {
		return fmt.Errorf("%w; delete these keys: %s", err, strings.Join(names, " "))
	}
	return nil
}

// singleRedis: singleredis, fenced or not.
func singleRedis(fence bool) setup {
	return func(e *env, addrs []string, auth userservers.Auth, prefix string) error {
		e.cfg = backend.Config{Backend: "singleredis", Addrs: addrs[:1], Username: auth.User, Password: auth.Password, Prefix: prefix, Fence: fence}
		return nil
	}
}

// redlockUsers: Redlock, without fences, over every address.
func redlockUsers(e *env, addrs []string, auth userservers.Auth, prefix string) error {
	e.cfg = backend.Config{Backend: "redlock", Addrs: addrs, Username: auth.User, Password: auth.Password, Prefix: prefix}
	return nil
}

// redlockStarted: Redlock over n redis-servers the run starts, fenced and
// restart-safe; beside each master's faults, a majority of the masters
// cut off at once.
func redlockStarted(n int) func() (*env, error) {
	return func() (*env, error) {
		e := &env{}
		var (
			via     []string
			srvs    []*servers.Redis
			proxies []*servers.Proxy
			names   []string
		)
		for i := range n {
			srv, p, err := e.redisVia()
			if err != nil {
				e.stop()
				return nil, err
			}
			via, srvs, proxies = append(via, p.Addr()), append(srvs, srv), append(proxies, p)
			names = append(names, string(rune('a'+i)))
			name := fmt.Sprintf("master %d", i)
			e.faults = append(e.faults, nemesis.RedisFaults(name, srv, p)...)
			e.faults = append(e.faults, laggingFailover(name, srv, p))
		}
		e.faults = append(e.faults, nemesis.CutMajority(asProxies(proxies)), bareMajorityFailover(srvs, proxies))
		// Restart safety: a master restarted without its data has no vote
		// for max_ttl (a fresh one neither, so the first acquisitions wait
		// that long); the names tie each master to its address.
		cfg, err := backend.ParseURL("redlock://" + strings.Join(via, ",") + "?fence=true&restart_safety=true&max_ttl=2s&master_names=" + strings.Join(names, ",") + "&prefix=history:")
		if err != nil {
			e.stop()
			return nil, err
		}
		e.cfg = cfg
		return e, nil
	}
}

// laggingFailover is the fault that fails a Redlock master over to a
// replica that has its restart-safety epoch but none of its recent
// writes (asynchronous replication): the failover that restart safety
// cannot see, since the epoch is there. It is emulated on the same
// server (failOver).
func laggingFailover(name string, srv *servers.Redis, p *servers.Proxy) nemesis.Fault {
	return nemesis.Fault{Name: "fail " + name + " over to a replica without its recent writes", Inject: func() (func(), error) {
		return nil, failOver(srv, p)
	}}
}

// bareMajorityFailover is the failover with the fewest grants a holder
// can have: the masters beyond a bare majority refuse connections while
// the fault holds, so every lock taken meanwhile has exactly a majority;
// when it heals, master 0, one of that majority, fails over to a replica
// without its recent writes, and the others come back. A holder is then
// left with one grant too few, and a second client can take the lock
// (compare's forced failover, as a fault of the nemesis).
func bareMajorityFailover(srvs []*servers.Redis, ps []*servers.Proxy) nemesis.Fault {
	m := len(ps)/2 + 1
	name := fmt.Sprintf("fail master 0 over after locks granted by masters 0-%d only (a bare majority of %d)", m-1, len(ps))
	return nemesis.Fault{Name: name, Inject: func() (func(), error) {
		for _, p := range ps[m:] {
			p.Partition(true)
		}
		return func() {
			// An error here leaves master 0 as it was: a fault not made,
			// which the history shows no less.
			_ = failOver(srvs[0], ps[0])
			for _, p := range ps[m:] {
				p.Partition(false)
			}
		}, nil
	}}
}

// failOver emulates a failover of the server srv, reached through p, to
// a replica that has its restart-safety epoch but none of its recent
// writes: p breaks every client connection and refuses new ones (the
// clients' connections to the old master break, and requests in flight
// are lost), the data is replaced by the epoch alone, and p lets the
// clients reconnect to what is now the new master.
func failOver(srv *servers.Redis, p *servers.Proxy) error {
	p.Partition(true)
	defer p.Partition(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	epoch, err := c.Get(ctx, redlock.EpochKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		return err
	}
	if epoch != "" {
		return c.Set(ctx, redlock.EpochKey, epoch, 0).Err()
	}
	return nil
}

func asProxies(ps []*servers.Proxy) []nemesis.Proxy {
	out := make([]nemesis.Proxy, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// ClockJump is how far the nemesis moves a legacysetnx client's clock:
// two TTLs, so that a client ahead takes live locks over and a client
// behind writes timestamps that others see as expired.
const ClockJump = 2 * TTL

// legacy: legacysetnx (unit ms), each client with
// its own wall clock that the nemesis moves (client 0's back, client 1's
// ahead, by ClockJump); with serverTime the timestamps come from the
// server's clock instead, so the jumps change nothing.
func legacy(serverTime bool) setup {
	return func(e *env, addrs []string, auth userservers.Auth, prefix string) error {
		var offsets [3]atomic.Int64 // clients 0 and 1 jump (every run has them); the others read offsets[2], 0
		e.faults = append(e.faults,
			clockJump("client 0's clock back", &offsets[0], -ClockJump),
			clockJump("client 1's clock ahead", &offsets[1], ClockJump))
		e.jumpsMatter = !serverTime
		e.open = func(ctx context.Context, client int) (lockswap.Locker, error) {
			off := &offsets[min(client, 2)]
			c := redis.NewClient(&redis.Options{Addr: addrs[0], Username: auth.User, Password: auth.Password, ContextTimeoutEnabled: true})
			e.stops = append(e.stops, func() { c.Close() })
			return legacysetnx.New(goredis.New(c), legacysetnx.Options{
				Prefix: prefix, Unit: legacysetnx.Milliseconds, ServerTime: serverTime,
				Clock: func() time.Time { return time.Now().Add(time.Duration(off.Load())) },
			})
		}
		return nil
	}
}

// clockJump is the fault that moves a client's wall clock by d (offset),
// and back when it heals: two jumps.
func clockJump(name string, offset *atomic.Int64, d time.Duration) nemesis.Fault {
	return nemesis.Fault{Name: "jump " + name + " by " + d.Abs().String(), Inject: func() (func(), error) {
		offset.Store(int64(d))
		return func() { offset.Store(0) }, nil
	}}
}

func etcdLease() (*env, error) {
	e := &env{}
	var (
		endpoint string
		pause    *servers.EtcdProcess
	)
	if _, ok := servers.EtcdBinaryPath(); ok {
		srv, err := servers.StartEtcdBinary()
		if err != nil {
			return nil, err
		}
		e.stops = append(e.stops, srv.Stop)
		endpoint, pause = srv.Endpoints()[0], srv
	} else {
		srv, err := servers.StartEtcd()
		if err != nil {
			return nil, err
		}
		e.stops = append(e.stops, srv.Close)
		endpoint = srv.Endpoints()[0]
	}
	p, err := e.proxy(hostPort(endpoint))
	if err != nil {
		e.stop()
		return nil, err
	}
	e.cfg = backend.Config{Backend: "etcdlease", Addrs: []string{p.Addr()}, Prefix: "history/"}
	if pause != nil {
		e.faults = nemesis.EtcdFaults("etcd", pause, p)
	} else {
		e.faults = nemesis.ProxyFaults("etcd", p)
	}
	return e, nil
}

// hostPort is endpoint without its scheme (http://).
func hostPort(endpoint string) string {
	if i := strings.Index(endpoint, "://"); i >= 0 {
		return endpoint[i+3:]
	}
	return endpoint
}

// Select returns the configurations whose name matches one of the
// path.Match patterns (all for none), in the order of cs; an error names
// a pattern that matches nothing or is malformed.
func Select(cs []Config, patterns []string) ([]Config, error) {
	if len(patterns) == 0 {
		return cs, nil
	}
	var out []Config
	seen := map[string]bool{}
	for _, p := range patterns {
		n := 0
		for _, c := range cs {
			ok, err := path.Match(p, c.Name)
			if err != nil {
				return nil, fmt.Errorf("pattern %q: %w", p, err)
			}
			if ok {
				n++
				if !seen[c.Name] {
					seen[c.Name] = true
					out = append(out, c)
				}
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("pattern %q matches no configuration", p)
		}
	}
	return out, nil
}

// osTempDir is os.TempDir (a variable for tests).
var osTempDir = os.TempDir
