package registry_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/registry"
)

// testRedis records what the parse of the scheme testredis was given and
// what its opener was handed.
var testRedis struct {
	mu     sync.Mutex
	parsed []registry.Redis
	opened [][]redisclient.Client
	closer []io.Closer
}

var registerTestRedis = sync.OnceFunc(func() {
	registry.Register(registry.RedisScheme("testredis", func(u *registry.URL, r registry.Redis) (registry.RedisOpener, error) {
		testRedis.mu.Lock()
		testRedis.parsed = append(testRedis.parsed, r)
		testRedis.mu.Unlock()
		if _, err := u.Bool("own"); err != nil {
			return nil, err
		}
		return func(rcs []redisclient.Client, closer io.Closer) (lockswap.Locker, error) {
			testRedis.mu.Lock()
			testRedis.opened = append(testRedis.opened, rcs)
			testRedis.closer = append(testRedis.closer, closer)
			testRedis.mu.Unlock()
			return memlock.New(memlock.NewStore()), nil
		}, nil
	}, "own"))
})

// lastParsed returns how often testredis's parse ran and what it was last
// given.
func lastParsed() (int, registry.Redis) {
	testRedis.mu.Lock()
	defer testRedis.mu.Unlock()
	if len(testRedis.parsed) == 0 {
		return 0, registry.Redis{}
	}
	return len(testRedis.parsed), testRedis.parsed[len(testRedis.parsed)-1]
}

// TestRedisScheme: a Redis backend's scheme checks the parameters every
// Redis backend takes before the backend's own parse sees the URL, hands
// it what they say, and opens the backend with the given clients.
func TestRedisScheme(t *testing.T) {
	registerTestRedis()
	if s, ok := registry.Lookup("testredis"); !ok || !s.TLS {
		t.Fatalf("Lookup(testredis) = %+v, %v: want a TLS scheme", s, ok)
	}
	if _, err := registry.ParseURL("testrediss://h:1,g:2/3?prefix=p:&ttl=2s&own=true&client=goredis&dial_timeout=1s"); err != nil {
		t.Fatal(err)
	}
	n, got := lastParsed()
	if want := (registry.Redis{Backend: "testredis", Servers: 2, Prefix: "p:", TTL: 2 * time.Second}); got != want {
		t.Errorf("parse was given %+v, want %+v", got, want)
	}
	for raw, mention := range map[string]string{
		"testredis://h:1?ttl=1ns":          "ttl",
		"testredis://h:1?dial_timeout=-1s": "dial_timeout",
		"testredis://h:1?client=nope":      "client",
		"testredis://h:1/db":               "database",
		"testredis://h:1?colour=red":       "colour",
	} {
		if _, err := registry.ParseURL(raw); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", raw, err, mention)
		}
		if again, _ := lastParsed(); again != n {
			t.Errorf("%s: the backend's parse ran on a URL the registry refuses", raw)
		}
	}
	if _, err := registry.ParseURL("testredis://h:1?own=maybe"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "own") {
		t.Errorf("own=maybe: %v, want the backend's own ErrInvalid", err)
	}

	mr := miniredis.RunT(t)
	rdb := goredislib.NewClient(&goredislib.Options{Addr: mr.Addr()})
	defer rdb.Close()
	given := goredis.New(rdb)
	u, err := registry.ParseURL("testredis://?ttl=1s")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := registry.Open(context.Background(), u, registry.Clients{Redis: []redisclient.Client{given}})
	if err != nil {
		t.Fatal(err)
	}
	lk.Close()
	if _, got := lastParsed(); got.Servers != 1 {
		t.Errorf("with one given client, parse was told of %d servers", got.Servers)
	}
	testRedis.mu.Lock()
	rcs, closer := testRedis.opened[len(testRedis.opened)-1], testRedis.closer[len(testRedis.closer)-1]
	testRedis.mu.Unlock()
	if len(rcs) != 1 || rcs[0] != given || closer != nil {
		t.Errorf("opener was handed %v and closer %v, want the given client and no closer (the caller owns it)", rcs, closer)
	}
}

// TestRedisOne: a backend of one server refuses any other number, naming
// itself.
func TestRedisOne(t *testing.T) {
	for n, wantErr := range map[int]bool{0: true, 1: false, 2: true} {
		err := registry.Redis{Backend: "onebackend", Servers: n}.One()
		if wantErr != (err != nil) || (err != nil && (!errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "onebackend needs exactly one host:port"))) {
			t.Errorf("One() with %d servers: %v", n, err)
		}
	}
}

// testDial is the dialer of client=testdial: hosts named "hang" wait for
// one another (all of them dialling at once) and then for the open's
// context; others make a client at once, whose closes are counted.
var testDial struct {
	mu      sync.Mutex
	hanging int
	all     chan struct{} // closed when testDial.want hang hosts are dialling
	want    int
	closes  int
}

var registerTestDial = sync.OnceFunc(func() {
	registry.RegisterRedisClient("testdial", func(ctx context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
		if strings.HasPrefix(s.Addr, "hang:") {
			testDial.mu.Lock()
			if testDial.hanging++; testDial.hanging == testDial.want {
				close(testDial.all)
			}
			testDial.mu.Unlock()
			<-ctx.Done()
			return nil, nil, ctx.Err()
		}
		return redisclient.Client(nil), closeFunc(func() error {
			testDial.mu.Lock()
			testDial.closes++
			testDial.mu.Unlock()
			return nil
		}), nil
	})
})

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// TestRedisClientsDialConcurrently: the hosts of a Redis URL are dialled
// at once (two servers that never answer cost one wait, not two), and
// when the open's context ends the clients already made are closed and the
// error matches the context's and ErrUnavailable.
func TestRedisClientsDialConcurrently(t *testing.T) {
	registerTestRedis()
	registerTestDial()
	testDial.mu.Lock()
	testDial.hanging, testDial.want, testDial.all, testDial.closes = 0, 2, make(chan struct{}), 0
	all := testDial.all
	testDial.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	concurrent := true
	go func() {
		select {
		case <-all:
		case <-time.After(2 * time.Second):
			concurrent = false
		}
		cancel()
	}()
	_, err := registry.OpenURL(ctx, "testredis://ok:1,hang:1,hang:2?client=testdial")
	<-ctx.Done()
	if !concurrent {
		t.Errorf("the two hung hosts were not dialled at once")
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Errorf("OpenURL: %v; want an error matching context.Canceled and ErrUnavailable", err)
	}
	testDial.mu.Lock()
	defer testDial.mu.Unlock()
	if testDial.closes != 1 {
		t.Errorf("the client made for ok:1 was closed %d times, want once", testDial.closes)
	}
}

// TestRedisClientsEndedContext: a context that has already ended fails
// the open of a URL that dials its hosts, lazy clients too, before any
// client is made.
func TestRedisClientsEndedContext(t *testing.T) {
	registerTestRedis()
	registerTestDial()
	testDial.mu.Lock()
	testDial.closes = 0
	testDial.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := registry.OpenURL(ctx, "testredis://ok:1?client=testdial"); !errors.Is(err, context.Canceled) || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Errorf("OpenURL under a cancelled context: %v; want an error matching context.Canceled and ErrUnavailable", err)
	}
	testDial.mu.Lock()
	defer testDial.mu.Unlock()
	if testDial.closes != 0 {
		t.Errorf("a client was made (and closed %d times) under a context that had ended", testDial.closes)
	}
}
