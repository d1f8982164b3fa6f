package servers_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/internal/testserver"
)

func newClient(t *testing.T, addr string, readTimeout time.Duration) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:        addr,
		ReadTimeout: readTimeout,
		MaxRetries:  -1, // every failure must be visible to the test
		DialTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRedisSetGetKillRestart(t *testing.T) {
	r := testserver.RedisT(t, servers.RedisOptions{})
	ctx := context.Background()
	c := newClient(t, r.Addr(), time.Second)

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}

	port, pid := r.Port(), r.Pid()
	r.Kill()
	if r.Pid() != 0 {
		t.Fatalf("Pid after Kill = %d, want 0", r.Pid())
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded on a killed server")
	}

	if err := r.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.Port() != port || r.Addr() != net.JoinHostPort("127.0.0.1", itoa(port)) {
		t.Fatalf("after Restart addr = %s, want port %d", r.Addr(), port)
	}
	if r.Pid() == pid || r.Pid() == 0 {
		t.Fatalf("Pid after Restart = %d (before %d), want a new process", r.Pid(), pid)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart without persistence: err = %v, want redis.Nil", err)
	}

	r.Stop()
	r.Stop() // idempotent
	if err := r.Restart(); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestRedisPersistenceSurvivesKill(t *testing.T) {
	r := testserver.RedisT(t, servers.RedisOptions{Persistence: true})
	ctx := context.Background()
	c := newClient(t, r.Addr(), time.Second)
	if err := c.Set(ctx, "k", "kept", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	r.Kill()
	if err := r.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "kept" {
		t.Fatalf("GET after restart with persistence = %q, %v; want kept", got, err)
	}
}

func TestRedisPauseResume(t *testing.T) {
	r := testserver.RedisT(t, servers.RedisOptions{})
	ctx := context.Background()
	c := newClient(t, r.Addr(), 200*time.Millisecond)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := r.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := c.Ping(ctx).Err(); !isTimeout(err) {
		r.Resume()
		t.Fatalf("PING on a paused server: err = %v, want a timeout", err)
	}
	r.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestRedisReplicaOfAndArgs(t *testing.T) {
	master := testserver.RedisT(t, servers.RedisOptions{Args: []string{"--maxmemory", "12345678"}})
	replica := testserver.RedisT(t, servers.RedisOptions{ReplicaOf: master.Addr()})
	ctx := context.Background()
	mc := newClient(t, master.Addr(), time.Second)
	rc := newClient(t, replica.Addr(), time.Second)

	if got, err := mc.ConfigGet(ctx, "maxmemory").Result(); err != nil || got["maxmemory"] != "12345678" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 12345678 from Args", got, err)
	}
	if err := mc.Set(ctx, "k", "replicated", 0).Err(); err != nil {
		t.Fatalf("SET on master: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := rc.Get(ctx, "k").Result()
		if err == nil && got == "replicated" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never saw the write: %q, %v\nreplica output:\n%s", got, err, replica.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := rc.Set(ctx, "x", "y", 0).Err(); err == nil {
		t.Fatal("write to a read-only replica succeeded")
	}
}

func TestStartRedisFixedPortInUse(t *testing.T) {
	testserver.NeedRedisServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = servers.StartRedis(servers.RedisOptions{Port: l.Addr().(*net.TCPAddr).Port})
	if err == nil {
		t.Fatal("StartRedis on a taken port succeeded")
	}
}
