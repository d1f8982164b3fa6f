package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/etcdlease"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesistest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// LibrariesEnv set to "1" runs TestLibrariesUnderNemesis (minutes long).
const LibrariesEnv = "LOCKSWAP_BENCH_LIBRARIES"

var (
	libOutFlag  = flag.String("libraries.out", "", "TestLibrariesUnderNemesis: write the results (JSON, for go run ./libreport) to this file")
	libHistFlag = flag.String("libraries.histories", "", "TestLibrariesUnderNemesis: write each run's history (JSON lines) to this folder")
)

// libRow is one library (or lockswap backend, as a reference) as the test
// configures it.
type libRow struct {
	id, name string
	module   string // whose version is reported ("": lockswap's tree)
	config   string
	servers  int           // redis-servers; 0: the etcd program
	ttl      time.Duration // the lock's TTL
	fenced   bool          // the register checks fences
	// prepare, when set, runs on the servers' own addresses first.
	prepare func(t *testing.T, direct []string)
	// open makes one client's Locker; addrs are the client's own proxies,
	// one per server ("host:port").
	open func(t *testing.T, addrs []string) lockswap.Locker
}

const (
	libRedisTTL = time.Second
	libEtcdTTL  = 2 * time.Second
	libClients  = 3
)

func libGoRedisPools(t *testing.T, addrs []string) []rsredis.Pool {
	var pools []rsredis.Pool
	for _, a := range addrs {
		pools = append(pools, rsgoredis.NewPool(redistest.GoRedisClient(t, a)))
	}
	return pools
}

func libEtcdClient(t *testing.T, addr string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// must returns v, failing t on err: must(f(...))(t).
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

const libGoRedis = "go-redis v9 client per server (ContextTimeoutEnabled, MaxRetries -1, DialTimeout 1 s)"

var libRows = []libRow{
	{id: "redsync-1", name: "redsync, 1 server", module: "github.com/go-redsync/redsync/v4", servers: 1, ttl: libRedisTTL,
		config: "redsync.New(goredis pool); NewMutex(key, WithExpiry(1 s)); LockContext / UnlockContext; defaults otherwise (32 tries 50–250 ms apart, drift factor 0.01, timeout factor 0.05); " + libGoRedis,
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return &redsyncLocker{rs: redsync.New(libGoRedisPools(t, addrs)...), nodes: len(addrs), ttl: libRedisTTL}
		}},
	{id: "redsync-3", name: "redsync, 3 servers", module: "github.com/go-redsync/redsync/v4", servers: 3, ttl: libRedisTTL,
		config: "as redsync, 1 server, over 3 independent servers (quorum 2)",
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return &redsyncLocker{rs: redsync.New(libGoRedisPools(t, addrs)...), nodes: len(addrs), ttl: libRedisTTL}
		}},
	{id: "redislock", name: "bsm/redislock", module: "github.com/bsm/redislock", servers: 1, ttl: libRedisTTL,
		config: "redislock.New(client).Obtain(ctx, key, 1 s, RetryStrategy LinearBackoff(10 ms)) until the context ends; Lock.Release; " + libGoRedis,
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return &bsmLocker{c: redislock.New(redistest.GoRedisClient(t, addrs[0])), ttl: libRedisTTL}
		}},
	{id: "rueidislock", name: "rueidislock", module: "github.com/redis/rueidis", servers: 1, ttl: libRedisTTL,
		config: "rueidislock.NewLocker per client: KeyMajority 1, KeyValidity 1 s (renewed every 0.5 s), NoLoopTracking, ForceSingleClient, client-side caching on; WithContext (each wait bounded to 3 s, then retried); the returned cancel releases",
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			lk := must(rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption: rueidis.ClientOption{InitAddress: addrs[:1], ForceSingleClient: true},
				KeyMajority:  1, KeyValidity: libRedisTTL, NoLoopTracking: true,
			}))(t)
			return &rueidisLocker{lk: lk, ttl: libRedisTTL, id: fmt.Sprintf("rueidislock-%p", lk)}
		}},
	{id: "etcd-mutex", name: "etcd concurrency.Mutex", module: "go.etcd.io/etcd/client/v3", servers: 0, ttl: libEtcdTTL,
		config: "a clientv3 client and a concurrency.Session (lease TTL 2 s, kept alive by the client) per client; NewMutex(session, key) per acquisition; Lock / Unlock",
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return &etcdMutexLocker{c: libEtcdClient(t, addrs[0]), ttl: libEtcdTTL, prefix: "mutex/"}
		}},
	{id: "lockswap-singleredis", name: "lockswap singleredis (reference, unfenced)", servers: 1, ttl: libRedisTTL,
		config: "singleredis.New(go-redis adapter, Options{TTL: 1 s}); register without fences",
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return must(singleredis.New(redistest.GoRedis(t, addrs[0]), singleredis.Options{TTL: libRedisTTL}))(t)
		}},
	{id: "lockswap-singleredis-fenced", name: "lockswap singleredis (reference, fenced)", servers: 1, ttl: libRedisTTL, fenced: true,
		config: "singleredis.New(go-redis adapter, Options{Fence: true, TTL: 1 s}); register checks fences",
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return must(singleredis.New(redistest.GoRedis(t, addrs[0]), singleredis.Options{Fence: true, TTL: libRedisTTL}))(t)
		}},
	{id: "lockswap-redlock-fenced", name: "lockswap redlock, 3 masters (reference, fenced, restart-safe)", servers: 3, ttl: libRedisTTL, fenced: true,
		config: "redlock.New(3 go-redis adapters, Options{Fence, RestartSafety, MaxTTL: 2 s, TTL: 1 s, adaptive InstanceTimeout}); each fresh master seeded with an old epoch (as redlock's nemesis test); register checks fences",
		prepare: func(t *testing.T, direct []string) {
			// Fresh masters hold no lock: an old epoch stands for masters
			// that have run for a while (else every vote waits MaxTTL at
			// the start). A restart without data still wipes it.
			for _, a := range direct {
				if err := redistest.GoRedisClient(t, a).SetNX(context.Background(), redlock.EpochKey, "1.0.seeded-by-test", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		},
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			var cs []redisclient.Client
			for _, a := range addrs {
				cs = append(cs, redistest.GoRedis(t, a))
			}
			return must(redlock.New(cs, redlock.Options{Fence: true, RestartSafety: true, MaxTTL: 2 * time.Second,
				TTL: libRedisTTL, MasterNames: []string{"a", "b", "c"}}))(t)
		}},
	{id: "lockswap-etcdlease", name: "lockswap etcdlease (reference, fenced)", servers: 0, ttl: libEtcdTTL, fenced: true,
		config: "etcdlease.Open(Config{Prefix, TTL: 2 s, DialTimeout 5 s, RequestTimeout 3 s}); register checks fences",
		open: func(t *testing.T, addrs []string) lockswap.Locker {
			return must(etcdlease.Open(etcdlease.Config{Endpoints: []string{"http://" + addrs[0]}, Prefix: "lease/",
				TTL: libEtcdTTL, DialTimeout: 5 * time.Second, RequestTimeout: 3 * time.Second}))(t)
		}},
}

// libResult is one row of the results file (bench/libreport reads it).
type libResult struct {
	Test            string   `json:"test"`
	Library         string   `json:"library"`
	Version         string   `json:"version"`
	Config          string   `json:"config"`
	Schedule        string   `json:"schedule"`
	Seed            uint64   `json:"seed"`
	Sections        int      `json:"sections"`
	Late            int      `json:"late"`
	Rejected        int      `json:"rejected"`
	Faults          string   `json:"faults,omitempty"`
	Pauses          int      `json:"pauses"`
	Verdict         string   `json:"verdict"`
	Violations      []string `json:"violations,omitempty"`
	Undecided       []string `json:"undecided,omitempty"`
	FenceViolations int      `json:"fence_violations"`
	History         string   `json:"history,omitempty"`
}

// libReport is the results file.
type libReport struct {
	Command   string      `json:"command"`
	Date      string      `json:"date"`
	Took      string      `json:"took"`
	For       string      `json:"nemesis_for"`
	Seed      uint64      `json:"seed"`
	LoadStart string      `json:"load_start"`
	LoadEnd   string      `json:"load_end"`
	Machine   string      `json:"machine"`
	Failed    bool        `json:"failed"` // the test failed (a setup error, a run too short)
	Rows      []libResult `json:"rows"`
}

// TestLibrariesUnderNemesis runs each library of libRows (and lockswap's
// backends as references) with three clients, each its own Locker and
// connections, over fresh servers of its own, through the recorded-
// increment workload of package history, under two seeded schedules:
// "server-faults" (internal/nemesistest's faults of each server: paused,
// restarted without its data, slowed by 20 ms, cut off; for etcd: paused,
// slowed, cut off) and "holder-pauses" (no server fault; one section in
// five pauses its holder until its lock ends and up to half a TTL more,
// with the client's connections cut meanwhile: a process pause, which
// stops the renewal that rueidislock and the etcd session run in the
// background as well). Under both, every section works (sleeps) up to a
// twentieth of the TTL between its read and its write. Each history is
// checked (Porcupine, a minute per key); a library's violation is a
// measurement, not a failure: the test fails only on setup errors and on
// runs of fewer than 3 sections.
// -nemesis.seed replays, -nemesis.for sets each run's length (default
// 10 s), -libraries.out writes the results for bench/libreport.
func TestLibrariesUnderNemesis(t *testing.T) {
	if os.Getenv(LibrariesEnv) != "1" {
		t.Skipf("set %s=1 to run it (minutes long)", LibrariesEnv)
	}
	start := time.Now()
	seed := nemesistest.Seed()
	d := nemesistest.Duration(10 * time.Second)
	rep := libReport{Date: start.UTC().Format(time.RFC3339), For: d.String(), Seed: seed, LoadStart: libLoad(), Machine: libMachine()}
	rep.Command = fmt.Sprintf("cd bench && %s=1 go test -count=1 -timeout 30m -run '%s' -v . -args -nemesis.for=%v -nemesis.seed=%d",
		LibrariesEnv, flag.Lookup("test.run").Value, d, seed)
	t.Logf("seed %d; replay: %s", seed, rep.Command)
	for _, row := range libRows {
		for _, sched := range []string{"server-faults", "holder-pauses"} {
			t.Run(row.id+"/"+sched, func(t *testing.T) {
				rep.Rows = append(rep.Rows, runLibrary(t, row, sched, seed, d))
			})
		}
	}
	rep.Took, rep.LoadEnd, rep.Failed = time.Since(start).Round(time.Second).String(), libLoad(), t.Failed()
	for _, r := range rep.Rows {
		t.Logf("%-45s %-14s %4d sections %3d late %3d rejected: %s", r.Library, r.Schedule, r.Sections, r.Late, r.Rejected, r.Verdict)
	}
	if *libOutFlag != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*libOutFlag, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", *libOutFlag)
	}
}

// runLibrary runs one row under one schedule and returns what was measured.
func runLibrary(t *testing.T, row libRow, sched string, seed uint64, d time.Duration) libResult {
	res := libResult{Test: t.Name(), Library: row.name, Version: libVersion(row.module), Config: row.config, Schedule: sched, Seed: seed}
	var direct, front []string
	var faults []nemesistest.Fault
	hold := 500 * time.Millisecond
	if row.servers > 0 {
		for i := range row.servers {
			srv := testserver.RedisT(t, testserver.RedisOptions{})
			p := testserver.ProxyT(t, srv.Addr())
			name := "the server"
			if row.servers > 1 {
				name = fmt.Sprintf("master %d", i)
			}
			faults = append(faults, nemesistest.RedisFaults(name, srv, p)...)
			direct, front = append(direct, srv.Addr()), append(front, p.Addr())
		}
	} else {
		srv := testserver.EtcdBinaryT(t)
		addr := strings.TrimPrefix(srv.Endpoints()[0], "http://")
		p := testserver.ProxyT(t, addr)
		direct, front, hold = []string{addr}, []string{p.Addr()}, time.Second
		res.Version += ", etcd server " + srv.Version()
		faults = nemesistest.EtcdFaults("etcd", srv, p)
	}
	if row.prepare != nil {
		row.prepare(t, direct)
	}
	// Each client reaches each server through a proxy of its own, which a
	// holder pause cuts.
	var lks []lockswap.Locker
	cuts := make([][]*testserver.Proxy, libClients)
	for c := range libClients {
		var addrs []string
		for _, f := range front {
			p := testserver.ProxyT(t, f)
			cuts[c], addrs = append(cuts[c], p), append(addrs, p.Addr())
		}
		lk := row.open(t, addrs)
		t.Cleanup(func() { lk.Close() })
		lks = append(lks, lk)
	}
	w := history.Workload{Lockers: lks, Keys: []string{"a", "b"}, Sections: 1 << 30, TTL: row.ttl,
		Register: history.NewRegister(row.fenced), Recorder: history.NewRecorder()}
	// Every section works for up to a twentieth of the TTL between its
	// read and its write (a section of no duration would show a second
	// holder only if it read in the same microseconds); under
	// holder-pauses, one in five then pauses past its lock.
	var pauses atomic.Int64
	var pause func(context.Context, int, lockswap.Lock)
	if sched == "holder-pauses" {
		pause = libPauseHolder(nemesistest.Rand(seed), 5, row.ttl/2, row.ttl, &pauses, func(c int, on bool) {
			for _, p := range cuts[c] {
				p.Blackhole(on)
			}
		})
	}
	work := nemesistest.Rand(seed + 1)
	w.Between = func(ctx context.Context, c int, l lockswap.Lock) {
		libSleep(ctx, time.Duration(work.IntN(int(row.ttl/20/time.Millisecond)+1))*time.Millisecond)
		if pause != nil {
			pause(ctx, c, l)
		}
	}
	t.Logf("seed %d (replay: -run '%s' -args -nemesis.seed=%d -nemesis.for=%v)", seed, t.Name(), seed, d)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	events := make(chan []nemesistest.Event, 1)
	if sched == "server-faults" {
		go func() {
			events <- nemesistest.Schedule{Faults: faults, MaxHold: hold, MaxGap: 300 * time.Millisecond, Seed: seed}.Run(ctx, t)
		}()
	} else {
		events <- nil
	}
	err := w.Run(ctx)
	res.Faults, res.Pauses = libFaultSummary(<-events), int(pauses.Load())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the workload ended with %v, want its deadline", err)
		res.Verdict = "not measured: the workload failed"
		return res
	}
	ops := w.Recorder.Ops()
	r := nemesistest.CheckHistory(t, seed, ops, 3, false)
	keys := map[string]bool{}
	for _, op := range ops {
		keys[op.Key] = true
		if op.Late {
			res.Late++
		}
		if !op.Wrote {
			res.Rejected++
		}
	}
	res.Sections, res.Violations, res.Undecided, res.FenceViolations = len(ops), r.Violations, r.Unknown, len(r.Fences)
	res.Verdict = libVerdict(r, len(ops), len(keys))
	if *libHistFlag != "" {
		res.History = libSaveHistory(t, ops)
	}
	t.Logf("%s, %s: %d sections, %d late, %d rejected, %s", row.name, sched, res.Sections, res.Late, res.Rejected, res.Verdict)
	return res
}

// libPauseHolder is nemesistest.PauseHolder as a process pause: in one
// section out of oneIn it cuts the client's connections (cut), waits until
// the lock's Done closes or ttl has passed since the pause began (a lock
// renewed in the background cannot outlive that once its renewals stop),
// waits up to maxExtra more, and restores the connections. For a lock
// that is not renewed, Done closes first and this is PauseHolder.
func libPauseHolder(r *nemesistest.Locked, oneIn int, maxExtra, ttl time.Duration, n *atomic.Int64, cut func(client int, on bool)) func(context.Context, int, lockswap.Lock) {
	return func(ctx context.Context, client int, l lockswap.Lock) {
		if r.IntN(oneIn) != 0 {
			return
		}
		n.Add(1)
		cut(client, true)
		defer cut(client, false)
		bound := time.NewTimer(ttl)
		defer bound.Stop()
		select {
		case <-l.Done():
		case <-bound.C:
		case <-ctx.Done():
			return
		}
		libSleep(ctx, time.Duration(r.IntN(int(maxExtra/time.Millisecond)+1))*time.Millisecond)
	}
}

// libSleep sleeps d or until ctx ends.
func libSleep(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// libVerdict says what the check found: never a pass for a history that
// was not decided.
func libVerdict(r history.Result, sections, keys int) string {
	if sections < 3 {
		return fmt.Sprintf("not measured: %d sections", sections)
	}
	var parts []string
	if n := len(r.Violations); n > 0 {
		parts = append(parts, fmt.Sprintf("lost updates on %d of %d keys", n, keys))
	}
	if n := len(r.Unknown); n > 0 {
		parts = append(parts, fmt.Sprintf("undecided on %d of %d keys", n, keys))
	}
	if n := len(r.Fences); n > 0 {
		parts = append(parts, fmt.Sprintf("%d fence violations", n))
	}
	if len(parts) == 0 {
		if !r.Linearizable {
			return "undecided"
		}
		return "linearizable"
	}
	return strings.Join(parts, "; ")
}

// libFaultSummary counts the faults that ran by kind ("pause", "restart",
// "delay", "cut").
func libFaultSummary(events []nemesistest.Event) string {
	if events == nil {
		return ""
	}
	count := map[string]int{}
	for _, e := range events {
		count[strings.Fields(e.Fault)[0]]++
	}
	var kinds []string
	for k, n := range count {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(kinds)
	return fmt.Sprintf("%d (%s)", len(events), strings.Join(kinds, ", "))
}

var libFileRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// libSaveHistory writes ops to -libraries.histories and returns the path.
func libSaveHistory(t *testing.T, ops []history.Op) string {
	if err := os.MkdirAll(*libHistFlag, 0o755); err != nil {
		t.Error(err)
		return ""
	}
	path := filepath.Join(*libHistFlag, libFileRE.ReplaceAllString(t.Name(), "_")+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer f.Close()
	if err := history.WriteJSONL(f, ops); err != nil {
		t.Error(err)
	}
	return path
}

// libVersion is module's version in this test binary, or lockswap's tree.
func libVersion(module string) string {
	if module == "" {
		out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
		if err != nil {
			return "lockswap (this tree)"
		}
		v := "lockswap " + strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			v += " + uncommitted changes"
		}
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == module {
				return module + " " + m.Version
			}
		}
	}
	// A test binary may carry no dependency list: ask the go command, as
	// run.sh does.
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module).Output(); err == nil {
		return module + " " + strings.TrimSpace(string(out))
	}
	return module + " (version: see bench/go.mod)"
}

func libLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// libMachine describes the machine and the server programs.
func libMachine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.*)$`).FindSubmatch(b); m != nil {
			cpu = string(m[1])
		}
	}
	redis := "unknown"
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		if m := regexp.MustCompile(`v=(\S+)`).FindSubmatch(out); m != nil {
			redis = string(m[1])
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s, redis-server %s", runtime.NumCPU(), cpu, runtime.Version(), redis)
}
