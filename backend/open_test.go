package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
)

func TestOpenSingleRedisBothClients(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	for _, client := range []string{"goredis", "redigo", "rueidis"} {
		lk, err := backend.OpenURL(ctx, "singleredis://"+mr.Addr()+"?prefix=app:&ttl=7s&fence=true&client="+client)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		l, err := lk.TryAcquire(ctx, "job")
		if err != nil {
			t.Fatalf("%s: TryAcquire: %v", client, err)
		}
		if !mr.Exists("app:job") {
			t.Errorf("%s: prefix not applied; keys: %v", client, mr.Keys())
		}
		if ttl := mr.TTL("app:job"); ttl.Seconds() != 7 {
			t.Errorf("%s: ttl=7s from the URL gave a key TTL of %v", client, ttl)
		}
		if _, ok := l.Fence(); !ok {
			t.Errorf("%s: fence=true gave a lock without a fence", client)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lk.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRequireRefusesMissingProperty(t *testing.T) {
	mr := miniredis.RunT(t)
	_, err := backend.OpenURL(context.Background(), "singleredis://"+mr.Addr()+"?require=fencing")
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "fencing") {
		t.Fatalf("singleredis without fence, require=fencing: err = %v, want ErrInvalid naming fencing", err)
	}
	lk, err := backend.OpenURL(context.Background(), "singleredis://"+mr.Addr()+"?require=fencing&fence=true")
	if err != nil {
		t.Fatalf("singleredis with fence, require=fencing: %v", err)
	}
	lk.Close()
}

func TestFromEnv(t *testing.T) {
	mr := miniredis.RunT(t)
	t.Setenv("MY_LOCKS", "singleredis://"+mr.Addr())
	lk, err := backend.FromEnv(context.Background(), "MY_LOCKS")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if g := lk.Guarantees(); g.Backend != "singleredis" {
		t.Errorf("backend from env = %s", g.Backend)
	}
	t.Setenv("MY_LOCKS", "")
	if _, err := backend.FromEnv(context.Background(), "MY_LOCKS"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "MY_LOCKS") {
		t.Errorf("empty env var: %v", err)
	}
}

func TestOpenWithGivenClient(t *testing.T) {
	mr := miniredis.RunT(t)
	rc := redistest.GoRedis(t, mr.Addr())
	lk, err := backend.Open(context.Background(), backend.Config{Backend: backend.SingleRedis, Prefix: "p:"},
		backend.Clients{Redis: []redisclient.Client{rc}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lk.TryAcquire(context.Background(), "k")
	if err != nil || !mr.Exists("p:k") {
		t.Fatalf("lock through a given client: %v, keys %v", err, mr.Keys())
	}
	l.Release(context.Background())
	lk.Close()
	// The given client is the user's: Close must leave it usable.
	if _, _, err := rc.Get(context.Background(), "p:k"); err != nil {
		t.Errorf("given client closed by Locker.Close: %v", err)
	}
	_, err = backend.Open(context.Background(), backend.Config{Backend: backend.SingleRedis}, backend.Clients{Redis: []redisclient.Client{nil}})
	if !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("nil given client: %v", err)
	}
}

func TestOpenEtcdAndSwitchByEnv(t *testing.T) {
	e := testserver.EtcdT(t)
	mr := miniredis.RunT(t)
	ctx := context.Background()
	// The same program code, two backends, chosen by the environment only.
	program := func() (string, error) {
		lk, err := backend.FromEnv(ctx, "")
		if err != nil {
			return "", err
		}
		defer lk.Close()
		l, err := lk.TryAcquire(ctx, "report")
		if err != nil {
			return "", err
		}
		defer l.Release(ctx)
		return lk.Guarantees().Backend, nil
	}
	for url, want := range map[string]string{
		"etcd://" + strings.TrimPrefix(e.Endpoints()[0], "http://") + "?prefix=/locks/&ttl=2s": "etcdlease",
		"singleredis://" + mr.Addr() + "?ttl=2s":                                               "singleredis",
	} {
		t.Setenv(backend.EnvVar, url)
		got, err := program()
		if err != nil || got != want {
			t.Errorf("%s: backend %q, %v; want %q", url, got, err, want)
		}
	}
}

func TestOpenRedlock(t *testing.T) {
	var hosts []string
	for i := 0; i < 3; i++ {
		hosts = append(hosts, miniredis.RunT(t).Addr())
	}
	ctx := context.Background()
	lk, err := backend.OpenURL(ctx, "redlock://"+strings.Join(hosts, ",")+"?ttl=5s&prefix=rl:&client=redigo")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if g := lk.Guarantees(); g.Backend != "redlock" || g.Nodes != 3 || g.Tolerates != 1 {
		t.Errorf("guarantees = %+v", g)
	}
	l, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOpenEtcdWithGivenClient(t *testing.T) {
	e := testserver.EtcdT(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	lk, err := backend.Open(ctx, backend.Config{Backend: backend.Etcd, Prefix: "/given/"}, backend.Clients{Etcd: cli})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lk.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	lk.Close()
	// The client is the caller's: still usable after the Locker closed.
	if _, err := cli.Get(ctx, "/given/"); err != nil {
		t.Errorf("given etcd client closed by Locker.Close: %v", err)
	}
}
