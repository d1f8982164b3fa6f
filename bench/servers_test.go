package bench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap/redisclient"
)

// Environment read by the benchmarks (bench/run.sh sets them).
const (
	// RedisEnv lists the redis-server addresses, comma separated: the first
	// serves the single-instance group, the first 3 and 5 the Redlock ones.
	RedisEnv = "LOCKSWAP_BENCH_REDIS"
	// NoFsyncEnv set to "1" runs the embedded etcd without fsync (etcd's
	// default, fsync on every commit, is what production runs).
	NoFsyncEnv = "LOCKSWAP_BENCH_ETCD_NOFSYNC"
)

// servers are the shared servers and clients of one test binary run: every
// library in a group talks through the same client objects (same
// connection pools) to the same server processes.
type servers struct {
	redisAddrs []string
	// The clients built the way the docs recommend (goredisOptions,
	// lsrueidis.NewClient), one per server.
	goredis []*goredis.Client
	redigo  []*redigo.Pool
	rueidis []rueidis.Client
	// rueidisAdapters are lockswap's adapters of rueidis, as
	// lsrueidis.NewClient returns them with the client.
	rueidisAdapters []redisclient.Client
	// goredisDefault and rueidisDefault are clients of the first server
	// built as the libraries do by default (go-redis without
	// ContextTimeoutEnabled, rueidis without AlwaysPipelining), otherwise
	// as the recommended ones: the floors "as the client comes" of issue 31.
	goredisDefault *goredis.Client
	rueidisDefault rueidis.Client
	etcd           *embed.Etcd
	etcdDir        string
	etcdClient     *clientv3.Client
}

// goredisOptions are the options of the shared go-redis clients: no
// retries, a pool for 32 goroutines and more, and ContextTimeoutEnabled,
// the setting the docs recommend (without it, go-redis's default, the
// adapter hands each command to another goroutine, one of its workers).
func goredisOptions(addr string) *goredis.Options {
	return &goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second, PoolSize: 64}
}

var (
	srvOnce sync.Once
	srv     *servers
	srvErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if srv != nil {
		srv.close()
	}
	os.Exit(code)
}

// shared returns the servers, starting the embedded etcd and opening the
// clients on first use. It skips when the redis-servers are not given.
func shared(b *testing.B) *servers {
	b.Helper()
	if os.Getenv(RedisEnv) == "" {
		b.Skipf("%s is not set: run bench/run.sh, which starts the redis-servers", RedisEnv)
	}
	srvOnce.Do(func() { srv, srvErr = start() })
	if srvErr != nil {
		b.Fatal(srvErr)
	}
	return srv
}

func start() (*servers, error) {
	s := &servers{}
	for _, a := range strings.Split(os.Getenv(RedisEnv), ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		s.redisAddrs = append(s.redisAddrs, a)
		s.goredis = append(s.goredis, goredis.NewClient(goredisOptions(a)))
		s.redigo = append(s.redigo, &redigo.Pool{
			MaxIdle: 64, IdleTimeout: time.Minute,
			DialContext: func(ctx context.Context) (redigo.Conn, error) {
				return redigo.DialContext(ctx, "tcp", a, redigo.DialConnectTimeout(time.Second))
			},
		})
	}
	if len(s.redisAddrs) < 5 {
		s.close()
		return nil, fmt.Errorf("%s has %d addresses; the Redlock groups need 5", RedisEnv, len(s.redisAddrs))
	}
	for _, a := range s.redisAddrs {
		c, ad, err := openRueidis(a)
		if c == nil {
			s.close()
			return nil, err
		}
		s.rueidis = append(s.rueidis, c)
		s.rueidisAdapters = append(s.rueidisAdapters, ad)
	}
	def := goredisOptions(s.redisAddrs[0])
	def.ContextTimeoutEnabled = false
	s.goredisDefault = goredis.NewClient(def)
	opt := rueidisOption(s.redisAddrs[0])
	opt.AlwaysPipelining = false
	c, err := rueidis.NewClient(opt)
	if c == nil {
		s.close()
		return nil, fmt.Errorf("rueidis %s: %w", s.redisAddrs[0], err)
	}
	s.rueidisDefault = c
	// A client of ForceSingleClient whose server did not answer comes with
	// the dial's error: the Ping below finds such a server.
	for _, c := range s.goredis {
		if err := c.Ping(context.Background()).Err(); err != nil {
			s.close()
			return nil, fmt.Errorf("redis %s: %w", c.Options().Addr, err)
		}
		if err := c.ScriptLoad(context.Background(), releaseSrc).Err(); err != nil {
			s.close()
			return nil, err
		}
	}
	if err := s.startEtcd(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts one embedded etcd member on free ports, with etcd's
// default timing and fsync (unless NoFsyncEnv is "1").
func (s *servers) startEtcd() error {
	dir, err := os.MkdirTemp("", "lockswap-bench-etcd-")
	if err != nil {
		return err
	}
	s.etcdDir = dir
	cp, err := freePort()
	if err != nil {
		return err
	}
	pp, err := freePort()
	if err != nil {
		return err
	}
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cp)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pp)}
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = os.Getenv(NoFsyncEnv) == "1"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	s.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return fmt.Errorf("embedded etcd not ready after 30s")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.Host}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	s.etcdClient = c
	return nil
}

func (s *servers) close() {
	for _, c := range s.goredis {
		c.Close()
	}
	for _, p := range s.redigo {
		p.Close()
	}
	for _, c := range s.rueidis {
		c.Close()
	}
	if s.goredisDefault != nil {
		s.goredisDefault.Close()
	}
	if s.rueidisDefault != nil {
		s.rueidisDefault.Close()
	}
	if s.etcdClient != nil {
		s.etcdClient.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	if s.etcdDir != "" {
		os.RemoveAll(s.etcdDir)
	}
}
