package historyrun

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestRunOnUserServers runs every configuration ConfigsOn gives for three
// password-protected Redis servers and an etcd the run did not start (as
// a user's): each runs, draws only faults on the clients' side (never a
// pause or a restart of the user's servers), gives no contradiction, and
// leaves nothing behind: the user's own key stays, the run's keys are
// gone, and the password shows nowhere in the report.
func TestRunOnUserServers(t *testing.T) {
	testserver.NeedRedisServer(t)
	const password = "history-s3cret"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var s userservers.Servers
	var admins []*redis.Client
	for range 3 {
		srv := testserver.RedisT(t, testserver.RedisOptions{})
		s.Redis = append(s.Redis, srv.Addr())
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		err := c.ConfigSet(ctx, "requirepass", password).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		c = redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: password})
		t.Cleanup(func() { c.Close() })
		admins = append(admins, c)
	}
	s.Auth = userservers.Auth{Password: password, From: "--password"}
	etcd := testserver.EtcdT(t)
	s.Etcd = []string{strings.TrimPrefix(etcd.Endpoints()[0], "http://")}
	if err := admins[0].Set(ctx, "user:data", "keep me", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, "history"); err != nil {
		t.Fatal(err)
	}

	cs := ConfigsOn(s)
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "singleredis,singleredis+fence,legacysetnx,legacysetnx+server_time,redlock3,etcdlease+fence" {
		t.Fatalf("ConfigsOn gave %s", got)
	}
	var progress bytes.Buffer
	rs, err := Run(ctx, Options{Configs: cs, Duration: 2 * time.Second, Clients: 3, Seed: 11, Out: t.TempDir(),
		On: " --redis " + strings.Join(s.Redis, ","), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Sections == 0 || r.Verdict == Contradicted || r.Verdict == Inconclusive || r.KeysLeft != "" {
			t.Errorf("%s: %d sections, %s: %s; keys left %q", r.Config, r.Sections, r.Verdict, r.Why, r.KeysLeft)
		}
		for _, e := range r.Faults {
			// The faults on the clients' side only, nothing that touches
			// the user's servers.
			if !strings.HasPrefix(e.Fault, "delay ") && !strings.HasPrefix(e.Fault, "cut ") && !strings.HasPrefix(e.Fault, "jump ") {
				t.Errorf("%s drew %q on the user's servers", r.Config, e.Fault)
			}
		}
	}
	var b bytes.Buffer
	if err := Write(&b, rs); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), password) || strings.Contains(progress.String(), password) {
		t.Errorf("the report or the progress shows the password:\n%s\n%s", b.String(), progress.String())
	}
	for i, c := range admins {
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]string{0: "user:data"}[i]
		if strings.Join(keys, ",") != want {
			t.Errorf("server %d keeps keys %q after the run, want only the user's (%q)", i+1, keys, want)
		}
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	left, err := ec.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil || left.Count != 0 {
		t.Errorf("etcd keeps %v keys after the run (%v), want none", left, err)
	}
}

// TestKeysLeftReported: when the run's keys cannot be deleted (the server
// is gone), the error names every key to delete, and the report says so.
func TestKeysLeftReported(t *testing.T) {
	err := deleteKeys(userservers.Servers{Redis: []string{"127.0.0.1:1"}}, 1, "lockswap-history-test:")
	if err == nil {
		t.Fatal("deleteKeys on a server that does not answer: no error")
	}
	for _, k := range []string{"lockswap-history-test:a", "{lockswap-history-test:b}:fence"} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not name key %s", err, k)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, []Result{{Config: "singleredis", Verdict: Holds, KeysLeft: err.Error()}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "KEYS LEFT on your servers: "+err.Error()) {
		t.Errorf("the report does not say which keys are left:\n%s", b.String())
	}
}
