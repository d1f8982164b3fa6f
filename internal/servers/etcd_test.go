package servers_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/internal/testserver"
)

func etcdClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestEtcdSingleMember(t *testing.T) {
	e := testserver.EtcdT(t)
	c := etcdClient(t, e.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	resp, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get = %v, want k=v", resp.Kvs)
	}
}

func TestEtcdClusterLeaderFailover(t *testing.T) {
	cl := testserver.EtcdClusterT(t, 3)
	if n := len(cl.Endpoints()); n != 3 {
		t.Fatalf("Endpoints has %d entries, want 3", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl.StopMember(old)
	next, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatalf("WaitLeader returned the stopped member %d", old)
	}

	var live []string
	for i, ep := range cl.Endpoints() {
		if i != old {
			live = append(live, ep)
		}
	}
	c := etcdClient(t, live)
	if _, err := c.Put(ctx, "after-failover", "ok"); err != nil {
		t.Fatalf("Put after stopping the leader: %v", err)
	}
	resp, err := c.Get(ctx, "after-failover")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "ok" {
		t.Fatalf("Get after failover = %v, %v", resp, err)
	}
}

// etcdGoroutines returns the stacks of goroutines running etcd server, raft,
// bbolt or gRPC server code.
func etcdGoroutines() []string {
	buf := make([]byte, 8<<20)
	var found []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		for _, pkg := range []string{"go.etcd.io/etcd/server/v3", "go.etcd.io/raft/v3", "go.etcd.io/bbolt", "google.golang.org/grpc.(*Server)"} {
			if strings.Contains(g, pkg) {
				found = append(found, g)
				break
			}
		}
	}
	return found
}

func TestEtcdCloseLeavesNoServerGoroutines(t *testing.T) {
	for _, n := range []int{1, 3} {
		c, err := servers.StartEtcdCluster(n)
		if err != nil {
			t.Fatal(err)
		}
		cli := etcdClient(t, c.Endpoints())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Put(ctx, "k", "v")
		cancel()
		if err != nil {
			c.Close()
			t.Fatalf("Put on %d members: %v", n, err)
		}
		cli.Close()
		c.Close()
		c.Close() // idempotent
		// Allow a goroutine a moment to leave its last instruction after
		// signalling that it is done (as goleak does); none may stay.
		for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
			g := etcdGoroutines()
			if len(g) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d etcd goroutines outlived Close of a %d-member cluster:\n%s", len(g), n, strings.Join(g, "\n\n"))
			}
		}
	}
}
