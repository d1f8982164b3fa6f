// Package soak is `lockswap soak`: every backend and Redis client under
// load (issue 27, "a busy machine"). Each configuration runs acquire +
// release cycles from 8 goroutines, each on its own keys (no contention),
// for a duration, once on the machine as it is ("idle") and once beside
// CPU hogs (child processes that spin, started and stopped by PID), and
// the report gives per configuration: cycles, cycles per second, errors
// (any error counts: the servers are healthy and nobody else holds the
// keys), release errors, and the lock keys left behind on the servers.
//
// The target it states: 0 errors, 0 lock keys left, and under the hogs at
// least half of the same configuration's cycles per second without them.
// The floor configurations (FloorBackend) run each Redis client alone
// with the same cycle, so that a report shows what the machine left any
// client beside the hogs; they are shown, not judged. And where the soak started the servers, each
// run's CPU time per cycle (this process and the redis-servers), which
// tells work the library adds under load from CPU time the hogs took.
//
// The loops are internal/benchloop's; the servers (redis-server processes,
// embedded etcd) internal/servers'; the backends are opened from their
// URLs through package registry, with client= choosing the Redis client.
package soak

import (
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"time"

	// The backends and Redis clients the configurations open by URL.
	_ "github.com/lockswap/lockswap/etcdlease"
	_ "github.com/lockswap/lockswap/legacysetnx"
	_ "github.com/lockswap/lockswap/redisclient/goredis"
	_ "github.com/lockswap/lockswap/redisclient/redigo"
	_ "github.com/lockswap/lockswap/redisclient/rueidis"
	_ "github.com/lockswap/lockswap/redlock"
	_ "github.com/lockswap/lockswap/singleredis"
)

// Defaults of Options.
const (
	DefaultDuration   = 60 * time.Second
	DefaultDeadline   = 3 * time.Second
	DefaultGoroutines = 8
	DefaultHogs       = 2
	// DefaultSettle is how long the soak waits after a configuration's
	// last cycle before it scans for keys left: twice
	// lockswap.DeadlineGrace, the time a request already sent when its
	// call's deadline ended gets before its lock is given back in the
	// background. It is shorter than every TTL the configurations use, so
	// that a lock key a release failed to delete is still there.
	DefaultSettle = 200 * time.Millisecond
	// TargetRatio is the target for cycles/s under the hogs ÷ cycles/s
	// without them.
	TargetRatio = 0.5
)

// Clients are the Redis client libraries every Redis configuration runs
// with (the client= values of Redis URLs).
var Clients = []string{"goredis", "redigo", "rueidis"}

// Config is one configuration: a backend with its parameters, a TTL and a
// Redis client.
type Config struct {
	// Backend labels the backend and its parameters: redlock3,
	// redlock5+fence, singleredis+fairwait, legacysetnx, etcdlease ...
	Backend string
	// Scheme is the URL scheme that opens it.
	Scheme string
	// Servers is how many Redis servers it uses (independent masters for
	// redlock); 0 for etcd.
	Servers int
	// Params are its own URL parameters, such as fence=true.
	Params url.Values
	// TTL is the lock's TTL (the URL's ttl= and each call's WithTTL).
	TTL time.Duration
	// Client is the Redis client (client=); "" for etcd.
	Client string
}

// Name is backend/ttl/client, such as redlock3+fence/300ms/redigo, or
// etcdlease/1s for etcd. The --configs flag matches it.
func (c Config) Name() string {
	n := c.Backend + "/" + c.TTL.String()
	if c.Client != "" {
		n += "/" + c.Client
	}
	return n
}

// KeyPrefix is the key prefix (prefix=) of c's run under load, for a
// soak whose Options.Prefix is base: every key the run writes starts with
// it, or with "{" and it for the keys kept in a lock key's hash slot
// (fence counters, fair-wait queues).
func (c Config) KeyPrefix(base string, load Load) string {
	r := strings.NewReplacer("/", "-", "+", "-")
	return base + string(load) + ":" + r.Replace(c.Name()) + ":"
}

// Configs returns every configuration, in the order the soak runs them:
// the floor of each Redis client (FloorBackend); redlock on 3 and 5 masters, fenced and not, with TTL 1 s and 300 ms;
// singleredis plain, fenced and with fair wait; legacysetnx (unit=ms);
// each with every Redis client; then etcdlease.
func Configs() []Config {
	var out []Config
	for _, client := range Clients {
		out = append(out, Config{Backend: FloorBackend, Servers: 1, TTL: time.Second, Client: client})
	}
	add := func(backend, scheme string, servers int, params url.Values, ttls ...time.Duration) {
		for _, ttl := range ttls {
			for _, client := range Clients {
				out = append(out, Config{Backend: backend, Scheme: scheme, Servers: servers, Params: params, TTL: ttl, Client: client})
			}
		}
	}
	for _, n := range []int{3, 5} {
		for _, fence := range []bool{false, true} {
			name, params := fmt.Sprintf("redlock%d", n), url.Values{}
			if fence {
				name += "+fence"
				params.Set("fence", "true")
			}
			add(name, "redlock", n, params, time.Second, 300*time.Millisecond)
		}
	}
	add("singleredis", "singleredis", 1, url.Values{}, time.Second)
	add("singleredis+fence", "singleredis", 1, url.Values{"fence": {"true"}}, time.Second)
	add("singleredis+fairwait", "singleredis", 1, url.Values{"fair_wait": {"true"}}, time.Second)
	add("legacysetnx", "legacysetnx", 1, url.Values{"unit": {"ms"}}, time.Second)
	out = append(out, Config{Backend: "etcdlease", Scheme: "etcd", TTL: time.Second})
	return out
}

// Select returns the configurations of all whose Name matches one of
// patterns (path.Match globs, such as "redlock3*/300ms/*" or
// "*/*/rueidis"; a pattern without "/" matches the backend label, such as
// "singleredis*"), in all's order; every configuration when patterns is
// empty. A pattern that matches nothing is an error.
func Select(all []Config, patterns []string) ([]Config, error) {
	if len(patterns) == 0 {
		return all, nil
	}
	var out []Config
	used := make([]bool, len(patterns))
	for _, c := range all {
		hit := false
		for i, p := range patterns {
			subject := c.Name()
			if !strings.Contains(p, "/") {
				subject = c.Backend
			}
			ok, err := path.Match(p, subject)
			if err != nil {
				return nil, fmt.Errorf("configuration pattern %q: %w", p, err)
			}
			if ok {
				hit, used[i] = true, true
			}
		}
		if hit {
			out = append(out, c)
		}
	}
	for i, p := range patterns {
		if !used[i] {
			return nil, fmt.Errorf("configuration pattern %q matches none of the configurations (names such as %s)", p, all[0].Name())
		}
	}
	return out, nil
}

// Load is the load a configuration runs under.
type Load string

// The loads.
const (
	// Idle is the machine as it is, without hogs (other work on the
	// machine still runs: "idle" is this tool's load, not the machine's).
	Idle Load = "idle"
	// Hogs is beside Options.Hogs CPU hogs.
	Hogs Load = "hogs"
)

// Options configure Run.
type Options struct {
	// Configs are the configurations to run (default Configs()).
	Configs []Config
	// Loads are the loads each configuration runs under, in this order,
	// one right after the other (default Idle then Hogs).
	Loads []Load
	// Duration is how long each configuration runs under each load
	// (default DefaultDuration).
	Duration time.Duration
	// Deadline bounds each Acquire and each Release (default
	// DefaultDeadline).
	Deadline time.Duration
	// Goroutines run cycles at once, each on its own ring of keys
	// (default DefaultGoroutines).
	Goroutines int
	// Hogs is how many CPU hogs run under the Hogs load (default
	// DefaultHogs).
	Hogs int
	// HogCommand makes one hog's command, which must spin until its
	// standard input ends or it is killed (default: this program
	// re-executed as `<exe> __soak-hog`, see HogCommand and Hog).
	HogCommand func() []string
	// Settle is the wait after a run's last cycle before its keys are
	// scanned (default DefaultSettle).
	Settle time.Duration
	// Prefix starts every key prefix (default
	// "lockswap-soak:<unix seconds>:"); see Config.KeyPrefix.
	Prefix string
	// RedisAddrs are Redis servers (independent masters) to use instead of
	// starting redis-server processes: at least as many as the
	// configurations need (5 with redlock5). Run writes and leaves keys on
	// them under Prefix.
	RedisAddrs []string
	// EtcdEndpoints are etcd endpoints (host:port) to use instead of
	// starting an embedded etcd.
	EtcdEndpoints []string
	// Progress, when set, gets a line as each run starts.
	Progress io.Writer
}

func (o *Options) defaults() {
	if len(o.Configs) == 0 {
		o.Configs = Configs()
	}
	if len(o.Loads) == 0 {
		o.Loads = []Load{Idle, Hogs}
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline
	}
	if o.Goroutines <= 0 {
		o.Goroutines = DefaultGoroutines
	}
	if o.Hogs <= 0 {
		o.Hogs = DefaultHogs
	}
	if o.HogCommand == nil {
		o.HogCommand = selfHog
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("lockswap-soak:%d:", time.Now().Unix())
	}
}
