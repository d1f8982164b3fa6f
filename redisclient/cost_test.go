package redisclient_test

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// TestClientCostLogged: each Redis backend says once at New, through its
// Logger, which of its clients were built in a way that costs every lock
// command more (redisclient.MsgClientCost: go-redis without
// ContextTimeoutEnabled or with a timeout of -2, a rueidis client not
// made by rueidis.NewClient),
// naming the clients and the setting, and says nothing of clients built
// the recommended way.
func TestClientCostLogged(t *testing.T) {
	servers := make([]string, 3)
	for i := range servers {
		servers[i] = miniredis.RunT(t).Addr()
	}
	goRedis := func(addr string, contextTimeout bool) redisclient.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: "s3cret-pw", ContextTimeoutEnabled: contextTimeout})
		t.Cleanup(func() { c.Close() })
		return goredis.New(c)
	}
	// With ContextTimeoutEnabled, but timeouts of -2: go-redis sets no
	// socket deadline, the context's included.
	goRedisNoDeadlines := func(addr string) redisclient.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2})
		t.Cleanup(func() { c.Close() })
		return goredis.New(c)
	}
	rueidisNamed := func(addr string) redisclient.Client {
		c, err := rueidislib.NewClient(rueidislib.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return rueidis.NewNamed(c, addr)
	}
	rueidisFast := func(addr string) redisclient.Client {
		c, a, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return a
	}
	// want: the clients named by each record, by the setting it names.
	for _, c := range []struct {
		name    string
		clients []redisclient.Client
		want    map[string][]int // setting named in the reason -> indexes of the clients
	}{
		{"singleredis/goredis-default", []redisclient.Client{goRedis(servers[0], false)}, map[string][]int{"ignores contexts without": {0}}},
		{"singleredis/goredis-context", []redisclient.Client{goRedis(servers[0], true)}, nil},
		{"singleredis/goredis-no-socket-deadlines", []redisclient.Client{goRedisNoDeadlines(servers[0])}, map[string][]int{"sets no socket deadline": {0}}},
		{"singleredis/rueidis-named", []redisclient.Client{rueidisNamed(servers[0])}, map[string][]int{"NewClient": {0}}},
		{"singleredis/rueidis-newclient", []redisclient.Client{rueidisFast(servers[0])}, nil},
		{"legacysetnx/goredis-default", []redisclient.Client{goRedis(servers[0], false)}, map[string][]int{"ignores contexts without": {0}}},
		{"redlock/mixed", []redisclient.Client{goRedis(servers[0], false), rueidisNamed(servers[1]), goRedis(servers[2], false)},
			map[string][]int{"ignores contexts without": {0, 2}, "NewClient": {1}}},
		{"redlock/recommended", []redisclient.Client{goRedis(servers[0], true), rueidisFast(servers[1]), goRedis(servers[2], true)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := logtest.New()
			var (
				lk  lockswap.Locker
				err error
			)
			switch backend, _, _ := strings.Cut(c.name, "/"); backend {
			case "singleredis":
				lk, err = singleredis.New(c.clients[0], singleredis.Options{Logger: rec.Logger()})
			case "legacysetnx":
				lk, err = legacysetnx.New(c.clients[0], legacysetnx.Options{Unit: legacysetnx.Milliseconds, Logger: rec.Logger()})
			case "redlock":
				lk, err = redlock.New(c.clients, redlock.Options{Logger: rec.Logger()})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			got := rec.Find(redisclient.MsgClientCost)
			if len(got) != len(c.want) {
				t.Fatalf("%d %q records, want %d: %v", len(got), redisclient.MsgClientCost, len(c.want), got)
			}
			for setting, idx := range c.want {
				var r *logtest.Record
				for i := range got {
					if strings.Contains(got[i].String("reason"), setting) {
						r = &got[i]
					}
				}
				if r == nil {
					t.Errorf("no %q record names %s: %v", redisclient.MsgClientCost, setting, got)
					continue
				}
				var names []string
				for _, i := range idx {
					names = append(names, c.clients[i].String())
				}
				if s := r.String("servers"); s != strings.Join(names, ", ") {
					t.Errorf("the record naming %s has servers %q, want %q", setting, s, strings.Join(names, ", "))
				}
				if strings.Contains(r.String("servers")+r.String("reason"), "s3cret-pw") {
					t.Errorf("the record shows the password: %v", r)
				}
			}
		})
	}
}
