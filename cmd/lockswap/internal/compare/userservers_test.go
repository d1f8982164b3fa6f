package compare

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestUserServers: pointed at servers it did not start (--redis, --etcd),
// compare runs every scenario that does not harm them with every default
// column, each result as declared; it does not run the rest and says why
// (a column that keeps a server-wide key, restart-safe Redlock, is not run
// at all); and it leaves nothing on the servers, nor touches the keys
// already there.
func TestUserServers(t *testing.T) {
	var addrs []string
	var clients []*goredis.Client
	for i := 0; i < 5; i++ {
		srv := testserver.RedisT(t, testserver.RedisOptions{})
		addrs = append(addrs, srv.Addr())
		clients = append(clients, goredisClient(t, srv.Addr()))
	}
	etcd := testserver.EtcdT(t)
	ctx := context.Background()
	// The user's own keys, among them the epoch their Redlock clients
	// with restart safety read.
	userKeys := map[string]string{redlock.EpochKey: "1700000000.0.theirs", "app:data": "x"}
	for _, c := range clients {
		for k, v := range userKeys {
			if err := c.Set(ctx, k, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	res, err := Run(ctx, Options{RedisAddrs: addrs, EtcdEndpoints: etcd.Endpoints(), Iterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Columns) != len(DefaultColumns) {
		t.Fatalf("%d columns, want the %d default ones", len(res.Columns), len(DefaultColumns))
	}
	for _, row := range res.Rows {
		for _, col := range res.Columns {
			b := col.Label
			c, ok := row.Cells[b]
			switch {
			case !ok:
				t.Errorf("%s/%s: no cell", row.Scenario, b)
			case c.Outcome == NotApplicable:
			case destructive(row.Scenario):
				if c.Verdict != NotRunByDesign || !strings.Contains(c.Detail, "would harm") {
					t.Errorf("%s/%s ran against the user's servers, or does not say it would harm them: %+v", row.Scenario, b, c)
				}
			case strings.Contains(col.Spec, "restart_safety=true"):
				if c.Verdict != NotRunByDesign || !strings.Contains(c.Detail, redlock.EpochKey) {
					t.Errorf("%s/%s: restart-safe redlock ran on the user's servers, or does not say why not: %+v", row.Scenario, b, c)
				}
			case c.Outcome != c.Expected || c.Verdict != AsDeclared:
				t.Errorf("%s/%s on the user's servers: measured %q, declared %q, verdict %q (%s)", row.Scenario, b, c.Outcome, c.Expected, c.Verdict, c.Detail)
			}
		}
	}
	// The column legend says what each column ran on, and every column but
	// restart-safe Redlock measured exclusion, plain Redlock among them.
	for _, col := range res.Columns {
		want := "your --redis servers"
		switch {
		case col.Backend == "etcdlease":
			want = "your --etcd endpoints"
		case strings.Contains(col.Spec, "restart_safety=true"):
			want = "not run on your --redis servers"
		}
		if !strings.HasPrefix(col.Servers, want) {
			t.Errorf("column %s: servers %q, want %q", col.Label, col.Servers, want)
		}
		if strings.Contains(col.Spec, "restart_safety=true") {
			continue
		}
		if c, _ := res.Cell(ScContention, col.Label); c.Outcome != Held {
			t.Errorf("%s contention on the user's servers: %+v", col.Label, c)
		}
	}
	if res.Contradictions() != 0 || res.Inconclusives() != 0 {
		t.Errorf("%d contradictions, %d inconclusive on the user's servers", res.Contradictions(), res.Inconclusives())
	}

	for i, c := range clients {
		for k, v := range userKeys {
			got, err := c.Get(ctx, k).Result()
			if err != nil || got != v {
				t.Errorf("server %d: the user's key %q = %q, %v; want %q untouched", i, k, got, err, v)
			}
		}
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, "*", 100).Result()
			if err != nil {
				t.Fatalf("server %d no longer answers: %v", i, err)
			}
			for _, k := range keys {
				if _, ours := userKeys[k]; !ours {
					ttl, _ := c.PTTL(ctx, k).Result()
					t.Errorf("server %d: compare left key %q behind (TTL %v)", i, k, ttl)
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	left, err := ec.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range left.Kvs {
		if kv.Lease == 0 {
			t.Errorf("etcd: compare left key %q behind without a lease", kv.Key)
		}
	}
}

// TestUserServersUnreachable: a server given with --redis or --etcd that
// refuses connections or never answers fails the comparison at once, with an
// outage error that names it, and nothing is measured.
func TestUserServersUnreachable(t *testing.T) {
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Sprintf("127.0.0.1:%d", ports[0])
	silent := testserver.ProxyT(t, testserver.RedisT(t, testserver.RedisOptions{}).Addr())
	silent.Blackhole(true)
	for _, o := range []Options{
		{RedisAddrs: []string{refused}, Backends: []string{"singleredis"}},
		{RedisAddrs: []string{silent.Addr()}, Backends: []string{"singleredis"}},
		{EtcdEndpoints: []string{refused}, Backends: []string{"etcdlease"}},
	} {
		addr := strings.Join(append(o.RedisAddrs, o.EtcdEndpoints...), ",")
		o.Scenarios = []string{ScContention}
		start := time.Now()
		res, err := Run(context.Background(), o)
		took := time.Since(start)
		if err == nil {
			t.Errorf("%s: no error; result %+v", addr, res)
			continue
		}
		if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: error %q: want an outage error (not contention) naming the server", addr, err)
		}
		// The promise to the user is 5 s; the check itself is bounded
		// by userCheckTimeout (3 s).
		if took > 5*time.Second {
			t.Errorf("%s: took %v to report an unreachable server, want under 5s", addr, took)
		}
	}
}

// TestKeysLeftWarned: when compare cannot delete its keys from the user's
// servers (here the server is gone), it says so through Options.Log, with
// the pattern of the keys to delete.
func TestKeysLeftWarned(t *testing.T) {
	rec := logtest.New()
	e := &env{redisAddrs: []string{"127.0.0.1:1"}, prefix: "lockswap-compare-test:", warn: rec.Logger().Handler()}
	cleanUserServers(e)
	r := rec.Wait(t, MsgKeysLeft, 10*time.Second)
	if r.String("pattern") != "*lockswap-compare-test:*" || !r.Has("error") {
		t.Fatalf("record %+v: want the pattern of compare's keys and the error", r)
	}
}
