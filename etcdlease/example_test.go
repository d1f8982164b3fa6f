package etcdlease_test

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/etcdlease"
	"github.com/lockswap/lockswap/internal/testserver"
)

// A lock on an (embedded) etcd, and a write that succeeds only while the
// lock is held: the fencing pattern.
func Example() {
	srv, err := testserver.StartEtcd()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	lk, err := etcdlease.Open(etcdlease.Config{Endpoints: srv.Endpoints(), Prefix: "/locks/"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lk.Close()

	ctx := context.Background()
	l, err := lk.Acquire(ctx, "report", lockswap.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	owner, _ := etcdlease.IsOwner(l)
	resp, err := lk.Client().Txn(ctx).If(owner).Then(clientv3.OpPut("/data/report", "v1")).Commit()
	fmt.Println("write while held:", err == nil && resp.Succeeded)

	_, err = lk.TryAcquire(ctx, "report")
	fmt.Println("second TryAcquire:", err != nil)

	fmt.Println("release:", l.Release(ctx))
	resp, err = lk.Client().Txn(ctx).If(owner).Then(clientv3.OpPut("/data/report", "v2")).Commit()
	fmt.Println("write after release:", err == nil && resp.Succeeded)
	// Output:
	// write while held: true
	// second TryAcquire: true
	// release: <nil>
	// write after release: false
}
