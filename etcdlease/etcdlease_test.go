package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/testserver"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// asLock returns the protocol's entry of an etcdlease lock.
func asLock(t *testing.T, l lockswap.Lock) *entry {
	t.Helper()
	el, ok := driver.Data[*entry](l)
	if !ok || el == nil {
		t.Fatalf("lock is a %T, want an etcdlease lock", l)
	}
	return el
}

// waitClosed waits for ch to close within d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("after %v: %s", d, what)
	}
}

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// queueLen counts the contender keys under key's queue prefix.
func queueLen(t *testing.T, c *clientv3.Client, lk *Locker, key string) int64 {
	t.Helper()
	r, err := c.Get(context.Background(), lk.QueuePrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count queue: %v", err)
	}
	return r.Count
}

// TestFIFO: waiters acquire in the order they joined the queue, and
// TryAcquire gets ErrHeld while anyone holds or waits (Wait: WaitQueue).
func TestFIFO(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	holder := openT(t, srv.Endpoints(), "fifo/")
	if g := holder.Guarantees(); g.Wait != lockswap.WaitQueue || g.Nodes != 1 || g.Tolerates != 0 {
		t.Fatalf("Guarantees %+v: want a fifo queue on 1 node tolerating 0", g)
	}
	l, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 5
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		lk := openT(t, srv.Endpoints(), "fifo/")
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			wl, err := lk.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			wl.Release(ctx)
		}(i)
		// The next waiter starts only once this one is in the queue.
		deadline := time.Now().Add(10 * time.Second)
		for queueLen(t, holder.Client(), holder, "k") != int64(i+2) {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never joined the queue", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if _, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire with a holder and %d waiters: %v, want ErrHeld", waiters, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	if fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("acquisition order %v, want the queue order [0 1 2 3 4]", got)
	}
	if n := queueLen(t, holder.Client(), holder, "k"); n != 0 {
		t.Fatalf("%d keys left in the queue after every waiter released", n)
	}
}

// TestCancelledWaiterLeavesNoKey: a waiter whose context ends removes its
// queue key, so the next release hands the lock to the one behind it.
func TestCancelledWaiterLeavesNoKey(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	a, b, c := openT(t, srv.Endpoints(), "cancel/"), openT(t, srv.Endpoints(), "cancel/"), openT(t, srv.Endpoints(), "cancel/")
	la, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.Acquire(bctx, "k"); errc <- err }()
	waitQueueLen(t, a, "k", 2)
	cgot := make(chan lockswap.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, "k")
		if err != nil {
			t.Errorf("third waiter: %v", err)
		}
		cgot <- l
	}()
	waitQueueLen(t, a, "k", 3)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("cancelled Acquire: %v, want context.Canceled and ErrHeld", err)
	}
	if n := queueLen(t, a.Client(), a, "k"); n != 2 {
		t.Fatalf("after the cancel the queue has %d keys, want 2 (holder and third waiter)", n)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-cgot:
		if l != nil {
			l.Release(ctx)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind a cancelled one never got the lock")
	}
}

// TestKeyDeletedEndsLock: deleting the key from outside closes Done; Extend
// and Release then report the loss.
func TestKeyDeletedEndsLock(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	lk := openT(t, srv.Endpoints(), "deleted/")
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	el := asLock(t, l)
	other := benchClient(t, srv.Endpoints())
	if _, err := other.Delete(ctx, el.etcdKey); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Done(), 5*time.Second, "Done still open after the key was deleted by another client")
	if err := l.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Extend after deletion: %v, want ErrLost", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("Release after deletion: %v, want ErrLost", err)
	}
}

// TestPausedHolderFencing: a holder whose keepalives stop (a paused process)
// loses the lock; its Done fires; a second client gets in; the first one's
// Release leaves the new holder alone, and its writes guarded by IsOwner or
// the fence are rejected — while an unguarded write goes through
// (SurvivesHolderPause: false, Fencing: true).
func TestPausedHolderFencing(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	a, b, c := openT(t, srv.Endpoints(), "pause/"), openT(t, srv.Endpoints(), "pause/"), openT(t, srv.Endpoints(), "pause/")
	if g := a.Guarantees(); !g.Fencing || g.SurvivesHolderPause || !g.StaleReleaseSafe {
		t.Fatalf("Guarantees %+v: want fencing, stale-release safety, and no survival of holder pauses", g)
	}
	la, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ea := asLock(t, la)
	fa, _ := la.Fence()
	ea.ls.stopKeepalive()
	waitClosed(t, la.Done(), 5*time.Second, "Done of a holder whose keepalives stopped never closed")
	lb, err := b.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("second client after the lease expired: %v", err)
	}
	defer lb.Release(ctx)
	fb, _ := lb.Fence()
	if fb <= fa {
		t.Fatalf("new holder's fence %d is not above the paused holder's %d", fb, fa)
	}
	if err := la.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Errorf("paused holder's Release: %v, want ErrLost", err)
	}
	if _, err := c.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("after the paused holder's Release a third client got %v: the stale Release freed the new holder's lock", err)
	}
	cli := a.Client()
	r, err := cli.Txn(ctx).If(ea.isOwner()).Then(clientv3.OpPut("pause-data", "from a")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if r.Succeeded {
		t.Fatal("a write guarded by the paused holder's IsOwner succeeded after it lost the lock")
	}
	cmp, ok := IsOwner(lb)
	if !ok {
		t.Fatal("IsOwner(lock) not ok for an etcdlease lock")
	}
	r, err = cli.Txn(ctx).If(cmp).Then(clientv3.OpPut("pause-data", "from b")).Commit()
	if err != nil || !r.Succeeded {
		t.Fatalf("the current holder's guarded write: succeeded=%v err=%v", r != nil && r.Succeeded, err)
	}
	// The weakness: nothing stops the paused holder's unguarded write.
	if _, err := cli.Put(ctx, "pause-data", "unguarded from a"); err != nil {
		t.Fatal(err)
	}
	// A resource that checks fences rejects it.
	var res fenced.Resource
	if err := res.Write("b", fb); err != nil {
		t.Fatal(err)
	}
	if err := res.Write("a", fa); !errors.Is(err, fenced.ErrStale) {
		t.Fatalf("fenced write by the paused holder: %v, want ErrStale", err)
	}
}

// TestCutOffClientDoneBeforeExpiry: a client whose connection to etcd is
// blackholed sees Done no later than the server expires its lease (as
// observed by another client watching the key).
func TestCutOffClientDoneBeforeExpiry(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	target := strings.TrimPrefix(srv.Endpoints()[0], "http://")
	proxy := testserver.ProxyT(t, target)
	lk, err := Open(Config{Endpoints: []string{proxy.Addr()}, Prefix: "cut/", RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	defer proxy.Blackhole(false) // let Close revoke quickly
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	el := asLock(t, l)
	observer := benchClient(t, srv.Endpoints())
	wch := observer.Watch(ctx, el.etcdKey, clientv3.WithRev(el.rev+1), clientv3.WithFilterPut())
	proxy.Blackhole(true)
	cut := time.Now()
	var doneAt, expiredAt time.Time
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-l.Done():
			doneAt = time.Now()
		case <-ctx.Done():
		}
	}()
	for wr := range wch {
		if len(wr.Events) > 0 {
			expiredAt = time.Now()
			break
		}
	}
	wg.Wait()
	if doneAt.IsZero() || expiredAt.IsZero() {
		t.Fatalf("done at %v, key expired at %v: one never happened", doneAt, expiredAt)
	}
	if doneAt.After(expiredAt) {
		t.Fatalf("Done closed %v after the cut, %v after the server expired the lease", doneAt.Sub(cut), doneAt.Sub(expiredAt))
	}
	if d := l.Deadline(); d.After(expiredAt) {
		t.Fatalf("Deadline %v is after the server-side expiry %v", d, expiredAt)
	}
	t.Logf("cut off: Done after %v, server expiry after %v", doneAt.Sub(cut), expiredAt.Sub(cut))
}

// TestLeaderStopKeepsLock: in a three-member cluster, stopping the leader
// while a lock is held keeps it held and exclusive; the next holder gets in
// when the holder releases (SurvivesFailover, Tolerates 1 of 3).
func TestLeaderStopKeepsLock(t *testing.T) {
	cl := testserver.EtcdClusterT(t, 3)
	ctx := ctxT(t, 60*time.Second)
	a := openT(t, cl.Endpoints(), "failover/")
	b := openT(t, cl.Endpoints(), "failover/")
	if g := a.Guarantees(); g.Nodes != 3 || g.Tolerates != 1 || !g.SurvivesFailover {
		t.Fatalf("Guarantees %+v: want 3 nodes tolerating 1, surviving failover", g)
	}
	la, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	leader, err := cl.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl.StopMember(leader)
	if _, err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	// For longer than the lease's TTL (keepalives must reach the new
	// leader), nobody else gets in and the holder keeps its lock, renewing
	// it as Do would.
	ttl := asLock(t, la).ls.ttl
	end := time.Now().Add(ttl + 500*time.Millisecond)
	lastExtend := time.Now()
	for time.Now().Before(end) {
		if time.Since(lastExtend) > 500*time.Millisecond {
			if err := la.Extend(ctx, 2*time.Second); err != nil {
				t.Fatalf("Extend after the leader stopped: %v", err)
			}
			lastExtend = time.Now()
		}
		if _, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("after the leader stopped another client got %v, want ErrHeld", err)
		}
		if !isOpen(la.Done()) {
			t.Fatal("the holder's Done closed after a leader change")
		}
		time.Sleep(100 * time.Millisecond) // the passage of time is the condition under test
	}
	got := make(chan lockswap.Lock, 1)
	go func() {
		l, err := b.Acquire(ctx, "k", lockswap.WithTTL(10*time.Second))
		if err != nil {
			t.Errorf("Acquire after failover: %v", err)
		}
		got <- l
	}()
	if err := la.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend after failover: %v", err)
	}
	select {
	case <-got:
		t.Fatal("a waiter got the lock while its holder still held it")
	case <-time.After(200 * time.Millisecond):
	}
	fa, _ := la.Fence()
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case lb := <-got:
		if lb == nil {
			return
		}
		if fb, _ := lb.Fence(); fb <= fa {
			t.Errorf("fence after failover %d not above %d", fb, fa)
		}
		lb.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10s of the release")
	}
}

// TestOutage: no member reachable is ErrUnavailable, not contention.
func TestOutage(t *testing.T) {
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := Open(Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}, RequestTimeout: 300 * time.Millisecond, DialTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open with nothing listening: %v (the client connects lazily)", err)
	}
	defer lk.Close()
	ctx := ctxT(t, 10*time.Second)
	_, err = lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire with etcd down: %v, want ErrUnavailable only", err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = lk.Acquire(actx, "k", lockswap.WithTTL(time.Second))
	if !errors.Is(err, lockswap.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with etcd down: %v, want ErrUnavailable and the context's error", err)
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{rpctypes.ErrNoLeader, lockswap.ErrUnavailable},
		{rpctypes.ErrTimeout, lockswap.ErrUnavailable},
		{rpctypes.ErrLeaderChanged, lockswap.ErrUnavailable},
		{status.Error(codes.Unavailable, "connection refused"), lockswap.ErrUnavailable},
		{context.DeadlineExceeded, lockswap.ErrUnavailable},
		{rpctypes.ErrPermissionDenied, lockswap.ErrInvalid},
		{rpctypes.ErrAuthFailed, lockswap.ErrInvalid},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestConfig: bad configuration is ErrInvalid; the password never shows.
func TestConfig(t *testing.T) {
	if _, err := New(nil, Options{}); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	for _, cfg := range []Config{
		{},
		{Endpoints: []string{" "}},
		{Endpoints: []string{"127.0.0.1:1"}, Password: "hunter2"},
		{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: -1},
		{Endpoints: []string{"127.0.0.1:1"}, RequestTimeout: -1},
	} {
		_, err := Open(cfg)
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Open(%+v): %v, want ErrInvalid", cfg, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows the password", err)
		}
	}
	srv := testserver.EtcdT(t)
	// Authentication is not enabled on the test server, which then ignores
	// credentials; String must not show the password.
	withPw, err := Open(Config{Endpoints: srv.Endpoints(), Username: "root", Password: "hunter2", DialTimeout: 2 * time.Second})
	if err != nil {
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows the password", err)
		}
	} else {
		if strings.Contains(withPw.String(), "hunter2") {
			t.Errorf("String() %q shows the password", withPw)
		}
		withPw.Close()
	}
	lk := openT(t, srv.Endpoints(), "cfg/")
	if s := lk.String(); !strings.Contains(s, srv.Endpoints()[0]) || !strings.Contains(s, "cfg/") {
		t.Errorf("String() = %q, want endpoints and prefix", s)
	}
	if p, q := lk.QueuePrefix("a"), lk.QueuePrefix("a/b"); strings.HasPrefix(q, p) {
		t.Errorf("queue prefix of a/b %q starts with that of a %q: locks would collide", q, p)
	}
}

// waitQueueLen waits, bounded, until key's queue has n entries.
func waitQueueLen(t *testing.T, lk *Locker, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queueLen(t, lk.Client(), lk, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q never reached %d entries", key, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestReleaseAfterCloseIsLost(t *testing.T) {
	srv := testserver.EtcdT(t)
	ctx := ctxT(t, 30*time.Second)
	a := openT(t, srv.Endpoints(), "closed/")
	b := openT(t, srv.Endpoints(), "closed/")
	l, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The kit may answer (the watch saw the lease revoked: "lost") or the
	// driver ("released the lock"): either way ErrClosed alone.
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrClosed) || errors.Is(err, lockswap.ErrLost) || errors.Is(err, lockswap.ErrUnavailable) ||
		!strings.Contains(err.Error(), "released the lock") && !strings.Contains(err.Error(), "lost") {
		t.Fatalf("Release after Close: %v, want ErrClosed alone, saying that the lock was lost or released (not an outage)", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, lockswap.ErrClosed) {
		t.Fatalf("Extend after Close: %v, want ErrClosed", err)
	}
	lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("after the holder's Locker closed, the key is still held: %v", err)
	}
	lb.Release(ctx)
}
