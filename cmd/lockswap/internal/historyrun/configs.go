package historyrun

import (
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/lockswap/lockswap/internal/nemesis"
	"github.com/lockswap/lockswap/internal/servers"
)

// Config is one backend configuration a run checks.
type Config struct {
	// Name names it: the backend, and "+fence" when its register checks
	// fences.
	Name string
	// Servers says what it starts, for --list.
	Servers string
	start   func() (*env, error)
}

// env is a configuration's running servers: the URL its clients open,
// the nemesis's faults over them, and what stops them.
type env struct {
	url    string
	faults []nemesis.Fault
	stops  []func()
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
	p, err := servers.StartProxy(srv.Addr())
	if err != nil {
		return nil, nil, err
	}
	e.stops = append(e.stops, p.Close)
	return srv, p, nil
}

// Configs returns every configuration: singleredis plain and fenced on one
// redis-server; Redlock fenced, restart-safe, over three; etcdlease on the
// etcd program on PATH (which can be paused) or, without one, an embedded
// etcd (its proxy's faults only). Every server is reached through a proxy
// that delays or cuts off its replies.
func Configs() []Config {
	return []Config{
		{Name: "singleredis", Servers: "one redis-server", start: singleRedis("")},
		{Name: "singleredis+fence", Servers: "one redis-server", start: singleRedis("?fence=true")},
		{Name: "redlock3+fence", Servers: "three redis-servers (restart_safety, max_ttl=2s)", start: redlock3},
		{Name: "etcdlease+fence", Servers: "etcd on PATH, else embedded etcd", start: etcdLease},
	}
}

func singleRedis(query string) func() (*env, error) {
	return func() (*env, error) {
		e := &env{}
		srv, p, err := e.redisVia()
		if err != nil {
			e.stop()
			return nil, err
		}
		e.url = "singleredis://" + p.Addr() + query
		e.faults = nemesis.RedisFaults("the server", srv, p)
		return e, nil
	}
}

func redlock3() (*env, error) {
	e := &env{}
	var via []string
	for i := range 3 {
		srv, p, err := e.redisVia()
		if err != nil {
			e.stop()
			return nil, err
		}
		via = append(via, p.Addr())
		e.faults = append(e.faults, nemesis.RedisFaults(fmt.Sprintf("master %d", i), srv, p)...)
	}
	// Restart safety: a master restarted without its data has no vote for
	// max_ttl (a fresh one neither, so the first acquisitions wait that
	// long); the names tie each master to its address.
	e.url = "redlock://" + strings.Join(via, ",") + "?fence=true&restart_safety=true&max_ttl=2s&master_names=a,b,c"
	return e, nil
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
	p, err := servers.StartProxy(strings.TrimPrefix(endpoint, "http://"))
	if err != nil {
		e.stop()
		return nil, err
	}
	e.stops = append(e.stops, p.Close)
	e.url = "etcdlease://" + p.Addr() + "?prefix=history/"
	if pause != nil {
		e.faults = nemesis.EtcdFaults("etcd", pause, p)
	} else {
		e.faults = nemesis.ProxyFaults("etcd", p)
	}
	return e, nil
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
