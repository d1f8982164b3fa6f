package soak

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap/internal/benchloop"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/registry"
)

// maxMessages is how many distinct error messages a result keeps.
const maxMessages = 5

// Result is one configuration under one load.
type Result struct {
	Config Config
	Load   Load
	// Prefix is the key prefix of the run (Config.KeyPrefix).
	Prefix string
	// Cycles are the acquire + release cycles completed without error.
	Cycles int
	// Elapsed is from the first cycle's start to the last one's end.
	Elapsed time.Duration
	// Errors counts every call that failed: acquires and releases.
	Errors int
	// ReleaseErrors are the Errors that Release returned.
	ReleaseErrors int
	// Messages are the first distinct error messages, with how often
	// each came.
	Messages []Message
	// Left are the keys found under Prefix after the run (and a settle).
	Left Leftovers
	// LoadAvg is the system's load average (1, 5, 15 minutes) as the run
	// ended; "" where the system does not say (not Linux).
	LoadAvg string
	// HogPIDs are the hogs' process ids (load Hogs).
	HogPIDs []int
	// HogCPU is the CPU time the hogs used (user + system), for a check
	// that they spun: about Hogs × the run's duration when they got their
	// share of the processors.
	HogCPU time.Duration
	// CPU is the CPU time (user + system) that this process and the
	// redis-server processes the soak started used during the run: the
	// client's and the servers' side of the cycles together. 0 when the
	// soak ran on given servers, or where /proc is missing.
	CPU time.Duration
	// Err says why the run could not be made or checked (a backend that
	// did not open, a hog that ended early, a scan that failed).
	Err string
}

// Message is one distinct error message.
type Message struct {
	Text  string
	Count int
}

// PerSec is cycles per second.
func (r Result) PerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Cycles) / r.Elapsed.Seconds()
}

// CPUPerCycle is CPU ÷ Cycles: what one cycle cost the machine; 0 when
// unknown.
func (r Result) CPUPerCycle() time.Duration {
	if r.Cycles == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Cycles)
}

// Clean reports whether the run met the target's absolute part: it ran,
// with no error and no lock key left.
func (r Result) Clean() bool { return r.Err == "" && r.Errors == 0 && r.Left.LockKeys == 0 }

// Report is what Run measured.
type Report struct {
	// Options are the options of the run, defaults filled in.
	Options Options
	// Env describes the servers and the machine.
	Env string
	// Results are one per configuration and load, in the order run.
	Results []Result
	// Interrupted is set when ctx ended before every run was made.
	Interrupted bool
}

// Ratio is the cycles per second of c under the hogs ÷ without them;
// false when the report lacks either run.
func (r *Report) Ratio(c Config) (float64, bool) {
	idle, hogs := r.find(c, Idle), r.find(c, Hogs)
	if idle == nil || hogs == nil || idle.PerSec() == 0 {
		return 0, false
	}
	return hogs.PerSec() / idle.PerSec(), true
}

// FloorRatio is the Ratio of the floor configuration of c's Redis client
// in the same report: what the machine left a client with no lockswap;
// false for etcd or when the report lacks that floor's runs.
func (r *Report) FloorRatio(c Config) (float64, bool) {
	if c.Client == "" {
		return 0, false
	}
	return r.Ratio(Config{Backend: FloorBackend, TTL: time.Second, Client: c.Client})
}

func (r *Report) find(c Config, load Load) *Result {
	for i := range r.Results {
		if res := &r.Results[i]; res.Config.Name() == c.Name() && res.Load == load {
			return res
		}
	}
	return nil
}

// Met reports whether c met the target: every run of it clean and, when
// it ran under both loads, a ratio of at least TargetRatio.
func (r *Report) Met(c Config) bool {
	for _, res := range r.Results {
		if res.Config.Name() == c.Name() && !res.Clean() {
			return false
		}
	}
	ratio, ok := r.Ratio(c)
	return !ok || ratio >= TargetRatio
}

// Missed returns the configurations that missed the target, the floors
// left out: they measure the machine, not lockswap.
func (r *Report) Missed() []Config {
	var out []Config
	seen := map[string]bool{}
	for _, res := range r.Results {
		if c := res.Config; !seen[c.Name()] && c.Backend != FloorBackend {
			seen[c.Name()] = true
			if !r.Met(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Run runs every configuration of o under every load, one after the
// other: the loads of a configuration right after each other, so that
// what else the machine runs changes as little as possible between them.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	e, err := startEnv(ctx, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep := &Report{Options: o, Env: e.desc}
	for _, c := range o.Configs {
		for _, load := range o.Loads {
			if ctx.Err() != nil {
				rep.Interrupted = true
				return rep, nil
			}
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "soak %s %s (%v) ...\n", c.Name(), load, o.Duration)
			}
			rep.Results = append(rep.Results, e.measure(ctx, o, c, load))
		}
	}
	rep.Interrupted = ctx.Err() != nil
	return rep, nil
}

// env is the servers of a soak.
type env struct {
	redisAddrs []string
	redisScan  []*redis.Client
	etcdHosts  []string
	etcdScan   *clientv3.Client
	closers    []func()
	desc       string
	// cpu meters this process and the redis-server processes it started;
	// nil when the soak runs on any given server, whose CPU it cannot
	// see.
	cpu *cpuMeter
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// startEnv starts (or takes from o) the servers the configurations need.
func startEnv(ctx context.Context, o Options) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			// What was started before the failure (the returns below
			// give a nil *env, not e).
			e.close()
		}
	}()
	need, etcd := 0, false
	for _, c := range o.Configs {
		need = max(need, c.Servers)
		etcd = etcd || c.Servers == 0
	}
	var desc []string
	// The CPU meter sees this process (and an embedded etcd) and the
	// redis-servers started here; none when any server is given.
	meter := &cpuMeter{pids: []string{"self"}}
	given := (need > 0 && len(o.RedisAddrs) > 0) || (etcd && len(o.EtcdEndpoints) > 0)
	if !given {
		e.cpu = meter
	}
	switch {
	case need == 0:
	case len(o.RedisAddrs) > 0:
		if len(o.RedisAddrs) < need {
			return nil, fmt.Errorf("soak: the configurations need %d Redis servers, %d given", need, len(o.RedisAddrs))
		}
		e.redisAddrs = o.RedisAddrs[:need]
		desc = append(desc, fmt.Sprintf("%d given Redis servers", need))
	default:
		for range need {
			r, err := servers.StartRedis(servers.RedisOptions{})
			if err != nil {
				return nil, fmt.Errorf("soak: %w", err)
			}
			e.closers = append(e.closers, r.Stop)
			e.redisAddrs = append(e.redisAddrs, r.Addr())
			meter.addPID(r.Pid())
		}
		desc = append(desc, fmt.Sprintf("%d redis-server processes (no persistence)", need))
	}
	for _, a := range e.redisAddrs {
		c := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		e.closers = append(e.closers, func() { c.Close() })
		e.redisScan = append(e.redisScan, c)
	}
	if etcd {
		eps := o.EtcdEndpoints
		if len(eps) == 0 {
			srv, err := servers.StartEtcd()
			if err != nil {
				return nil, fmt.Errorf("soak: %w", err)
			}
			e.closers = append(e.closers, srv.Close)
			eps = srv.Endpoints()
			desc = append(desc, "embedded etcd (one member, in this process)")
		} else {
			desc = append(desc, "given etcd")
		}
		var urls []string
		for _, ep := range eps {
			host := ep
			if i := strings.Index(ep, "://"); i >= 0 {
				host = ep[i+3:]
			}
			e.etcdHosts = append(e.etcdHosts, host)
			urls = append(urls, "http://"+host)
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: ctx})
		if err != nil {
			return nil, fmt.Errorf("soak: etcd client: %w", err)
		}
		e.closers = append(e.closers, func() { c.Close() })
		e.etcdScan = c
	}
	e.desc = fmt.Sprintf("%s; %d CPUs, GOMAXPROCS %d, %s/%s", strings.Join(desc, ", "), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	return e, nil
}

// url is c's backend URL on e's servers with prefix.
func (e *env) url(c Config, prefix string) string {
	q := url.Values{}
	for k, v := range c.Params {
		q[k] = v
	}
	q.Set("ttl", c.TTL.String())
	q.Set("prefix", prefix)
	hosts := e.etcdHosts
	if c.Servers > 0 {
		hosts = e.redisAddrs[:c.Servers]
		q.Set("client", c.Client)
	}
	return c.Scheme + "://" + strings.Join(hosts, ",") + "?" + q.Encode()
}

// open opens c's backend by its URL, or its client alone for a floor
// configuration, whose keys get prefix.
func (e *env) open(ctx context.Context, c Config, prefix string) (taker, func(), error) {
	if c.Backend == FloorBackend {
		floor, closeFloor, err := openFloor(c.Client, e.redisAddrs[0])
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, key string, ttl time.Duration) (func(context.Context) error, error) {
			return floor(ctx, prefix+key, ttl)
		}, closeFloor, nil
	}
	lk, err := registry.OpenURL(ctx, e.url(c, prefix))
	if err != nil {
		return nil, nil, err
	}
	return lockerTaker(lk), func() { lk.Close() }, nil
}

// measure runs c under load for o.Duration and scans for what it left.
func (e *env) measure(ctx context.Context, o Options, c Config, load Load) (res Result) {
	res = Result{Config: c, Load: load, Prefix: c.KeyPrefix(o.Prefix, load)}
	var errs []error
	defer func() {
		if err := errors.Join(errs...); err != nil {
			res.Err = err.Error()
		}
	}()
	take, closeTaker, err := e.open(ctx, c, res.Prefix)
	if err != nil {
		errs = append(errs, fmt.Errorf("open: %w", err))
		return res
	}
	defer closeTaker()
	var hs hogs
	if load == Hogs {
		if hs, err = startHogs(o.Hogs, o.HogCommand); err != nil {
			errs = append(errs, err)
			return res
		}
		res.HogPIDs = hs.pids()
		defer func() {
			if hs != nil {
				hs.stop()
			}
		}()
	}
	cnt := &counter{parent: ctx}
	loop := benchloop.Loop{Shape: benchloop.Parallel(o.Goroutines), NewCycle: func() benchloop.Cycle {
		return cnt.cycle(take, c.TTL, o.Deadline)
	}}
	// Every call has its deadline: the grace covers a cycle that starts
	// just before the end, so that the loop never cuts one off.
	cpu0, cpuOK := e.readCPU()
	r, _ := loop.For(ctx, o.Duration, 2*o.Deadline+time.Second) // a cycle returns no error: the counter keeps them
	if cpu1, ok := e.readCPU(); ok && cpuOK {
		res.CPU = cpu1 - cpu0
	}
	res.LoadAvg = loadAvg()
	if hs != nil {
		cpu, err := hs.stop()
		res.HogCPU, hs = cpu, nil
		if err != nil {
			errs = append(errs, err)
		}
	}
	res.Elapsed = r.Elapsed
	res.Cycles = int(cnt.ok.Load())
	res.Errors = int(cnt.acquireErrs.Load() + cnt.releaseErrs.Load())
	res.ReleaseErrors = int(cnt.releaseErrs.Load())
	res.Messages = cnt.messages()
	select {
	case <-time.After(o.Settle):
	case <-ctx.Done():
		return res
	}
	left, err := e.scan(ctx, c, res.Prefix)
	res.Left = left
	if err != nil {
		errs = append(errs, fmt.Errorf("scan: %w", err))
	}
	return res
}

// readCPU reads e's CPU meter; false without one.
func (e *env) readCPU() (time.Duration, bool) {
	if e.cpu == nil {
		return 0, false
	}
	return e.cpu.read()
}

// scan finds the keys of prefix on c's servers.
func (e *env) scan(ctx context.Context, c Config, prefix string) (Leftovers, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if c.Servers == 0 {
		return scanEtcd(ctx, e.etcdScan, prefix)
	}
	var l Leftovers
	for _, rc := range e.redisScan[:c.Servers] {
		one, err := scanRedis(ctx, rc, prefix)
		l.add(one)
		if err != nil {
			return l, err
		}
	}
	return l, nil
}

// counter counts the cycles of one run and keeps the first distinct
// error messages.
type counter struct {
	parent                       context.Context // the soak's: its end is an interruption, not an error
	ok, acquireErrs, releaseErrs atomic.Int64
	mu                           sync.Mutex
	msgs                         []Message
}

// cycle is one take and release, each with its deadline. It
// counts a failure instead of returning it, so that the loop goes on.
func (c *counter) cycle(take taker, ttl, deadline time.Duration) benchloop.Cycle {
	return func(ctx context.Context, key string) error {
		actx, cancel := context.WithTimeout(ctx, deadline)
		release, err := take(actx, key, ttl)
		cancel()
		if err != nil {
			c.fail(&c.acquireErrs, "acquire", err)
			return nil
		}
		rctx, cancel := context.WithTimeout(ctx, deadline)
		err = release(rctx)
		cancel()
		if err != nil {
			c.fail(&c.releaseErrs, "release", err)
			return nil
		}
		c.ok.Add(1)
		return nil
	}
}

func (c *counter) fail(n *atomic.Int64, what string, err error) {
	if c.parent.Err() != nil {
		return // interrupted
	}
	n.Add(1)
	text := what + ": " + err.Error()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.msgs {
		if c.msgs[i].Text == text {
			c.msgs[i].Count++
			return
		}
	}
	if len(c.msgs) < maxMessages {
		c.msgs = append(c.msgs, Message{Text: text, Count: 1})
	}
}

func (c *counter) messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.msgs...)
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "" where
// /proc/loadavg is missing.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
