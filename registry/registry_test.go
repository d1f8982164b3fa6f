package registry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	_ "github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/registry"
	"github.com/lockswap/lockswap/singleredis"
)

// TestOpenWithoutBackendPackage: a program that imports singleredis and
// the go-redis adapter opens singleredis URLs through the registry, and is
// told which import a client= it did not link needs.
func TestOpenWithoutBackendPackage(t *testing.T) {
	mr := miniredis.RunT(t)
	ctx := context.Background()
	lk, err := registry.OpenURL(ctx, "singleredis://"+mr.Addr()+"?ttl=3s&prefix=p:")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	sr, ok := lk.(*singleredis.Locker)
	if !ok || sr.DefaultTTL().Seconds() != 3 {
		t.Fatalf("OpenURL returned %T; want *singleredis.Locker with the URL's ttl", lk)
	}
	l, err := lk.TryAcquire(ctx, "k")
	if err != nil || !mr.Exists("p:k") || mr.TTL("p:k").Seconds() != 3 {
		t.Fatalf("TryAcquire: %v; keys %v", err, mr.Keys())
	}
	l.Release(ctx)

	for _, client := range []string{"redigo", "rueidis"} {
		_, err = registry.ParseURL("singleredis://" + mr.Addr() + "?client=" + client)
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "redisclient/"+client) {
			t.Errorf("client=%s without its adapter: %v, want ErrInvalid naming the import", client, err)
		}
	}
}

// registerTestmem registers the scheme testmem once per test binary (a
// scheme registers once: -count=2 runs the test twice).
var registerTestmem = sync.OnceFunc(func() {
	store := memlock.NewStore()
	registry.Register(registry.Scheme{
		Name:   "testmem",
		Params: []string{"ttl"},
		Parse: func(u *registry.URL, _ registry.Clients) (registry.OpenFunc, error) {
			if _, err := u.TTL(); err != nil {
				return nil, err
			}
			if len(u.Hosts) != 0 {
				return nil, fmt.Errorf("testmem takes no hosts: %w", lockswap.ErrInvalid)
			}
			return func(context.Context) (lockswap.Locker, error) { return memlock.New(store), nil }, nil
		},
	})
})

// TestThirdPartyScheme: a backend from another package registers its
// scheme and parameters, and is opened like the built-in ones.
func TestThirdPartyScheme(t *testing.T) {
	registerTestmem()
	ctx := context.Background()
	lk, err := registry.OpenURL(ctx, "testmem://?ttl=1s&require=fencing")
	if err != nil {
		t.Fatal(err)
	}
	lk.Close()
	for raw, mention := range map[string]string{
		"testmem://h:1":            "no hosts",
		"testmem://?colour=red":    "colour",
		"testmem://?ttl=forever":   "ttl",
		"testmem://?require=magic": "magic",
		"testmems://":              "testmems",
	} {
		if _, err := registry.OpenURL(ctx, raw); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", raw, err, mention)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a taken scheme did not panic")
		}
	}()
	registry.Register(registry.Scheme{Name: "singleredis", Parse: func(*registry.URL, registry.Clients) (registry.OpenFunc, error) { return nil, nil }})
}
