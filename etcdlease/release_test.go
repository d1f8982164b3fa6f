package etcdlease

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
)

// releasesInBackground counts the goroutines that go on with a release
// whose outcome was unknown at its caller's deadline (the kit's
// background retries, up to lockswap.CleanupTimeout).
func releasesInBackground() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "internal/attempt.Release") && !strings.Contains(g, "testing.tRunner") {
			n++
		}
	}
	return n
}

// present reports whether key exists in etcd, read through lk's client.
func present(t *testing.T, lk *Locker, key string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := lk.Client().Get(ctx, key)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return len(r.Kvs) > 0
}

// releaseUnanswered acquires key through lk, cuts lk off from etcd (the
// proxy holds every byte) and releases: the Release returns within its
// deadline plus the promise, with an error matching ErrUnavailable (not
// ErrLost: nothing is known to be gone), the lock ends (Done), its key is
// still in etcd and the kit goes on with the release in the background.
// It returns the key's name in etcd.
func releaseUnanswered(t *testing.T, lk, direct *Locker, cut func(bool), key string, ttl time.Duration) string {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	etcdKey, _ := EtcdKey(l)
	cut(true)
	err, over := timed(300*time.Millisecond, l.Release)
	if over > promise {
		t.Errorf("Release with etcd unreachable returned %v after its deadline, want ≤ %v", over, promise)
	}
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Release with etcd unreachable: %v, want ErrUnavailable (outcome unknown), not ErrLost", err)
	}
	if isOpen(l.Done()) {
		t.Error("Done still open after a Release whose outcome is unknown: the holder gave the lock up")
	}
	if !present(t, direct, etcdKey) {
		t.Fatal("the key is gone while etcd was unreachable: nothing below shows the release going on")
	}
	waitFor(t, time.Second, "no release goes on in the background", func() bool { return releasesInBackground() > 0 })
	return etcdKey
}

// TestReleaseOutcomeUnknown: a Release that etcd does not answer returns
// within its caller's deadline with ErrUnavailable, and the kit goes on
// with it in the background; once etcd answers again the key is deleted
// and another client gets the lock. With etcd hanging (the proxy holds the
// bytes) that is long before the lease, granted for the lock's 20 s TTL,
// could expire; with the connections reset (nothing sent meanwhile
// arrives), the background retries or the revocation of the retired lease
// delete it once the client has reconnected, and the lease's expiry (3 s,
// no longer kept alive) at the latest.
func TestReleaseOutcomeUnknown(t *testing.T) {
	for _, c := range []struct {
		name   string
		cut    func(*testserver.Proxy) func(bool)
		ttl    time.Duration
		within time.Duration
	}{
		{"hang", func(p *testserver.Proxy) func(bool) { return p.Blackhole }, 20 * time.Second, 10 * time.Second},
		{"reset", func(p *testserver.Proxy) func(bool) { return p.Partition }, 3 * time.Second, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, proxy, lk := proxied(t, "unknown"+c.name+"/")
			direct := openT(t, srv.Endpoints(), "unknown"+c.name+"/")
			cut := c.cut(proxy)
			etcdKey := releaseUnanswered(t, lk, direct, cut, "k", c.ttl)
			back := time.Now()
			cut(false)
			waitFor(t, c.within, "the key is still in etcd after etcd came back", func() bool { return !present(t, direct, etcdKey) })
			t.Logf("key deleted %v after etcd came back", time.Since(back).Round(time.Millisecond))
			waitFor(t, 5*time.Second, "the background release outlived its answer", func() bool { return releasesInBackground() == 0 })
			ctx := ctxT(t, 30*time.Second)
			l, err := direct.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
			if err != nil {
				t.Fatalf("after the release went through, another client gets %v", err)
			}
			l.Release(ctx)
		})
	}
}

// TestReleaseOutcomeUnknownClose: Close, with etcd still unreachable, ends
// the release that goes on in the background and returns within a second;
// the key, whose lease Close could not revoke, goes when the lease expires
// on the server (no keepalive is sent for it any more).
func TestReleaseOutcomeUnknownClose(t *testing.T) {
	srv, proxy, lk := proxied(t, "unknownclose/")
	direct := openT(t, srv.Endpoints(), "unknownclose/")
	etcdKey := releaseUnanswered(t, lk, direct, proxy.Blackhole, "k", 3*time.Second)
	start := time.Now()
	lk.Close()
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("Close with a release going on and etcd unreachable took %v, want ≤ 1.5s (CloseWait and the revoke's 500 ms run together; waiting for CleanupTimeout would take longer)", took)
	}
	waitFor(t, time.Second, "the background release outlived Close", func() bool { return releasesInBackground() == 0 })
	proxy.Blackhole(false)
	waitFor(t, 10*time.Second, "the key outlived its lease", func() bool { return !present(t, direct, etcdKey) })
}

// TestUncertain: a request that got no answer, or whose proposal timed
// out, may have been applied (the kit retries such a release); an answer
// that says what happened, and an error of the backend's own, may not.
func TestUncertain(t *testing.T) {
	lk := &Locker{c: clientv3.NewCtxClient(context.Background())}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{context.Canceled, true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{status.Error(codes.DeadlineExceeded, "deadline"), true},
		{rpctypes.ErrTimeout, true},
		{rpctypes.ErrTimeoutDueToLeaderFail, true},
		{rpctypes.ErrNoLeader, false},
		{rpctypes.ErrTooManyRequests, false},
		{rpctypes.ErrPermissionDenied, false},
		{status.Error(codes.InvalidArgument, "bad"), false},
	} {
		if got := uncertain(lk.fail(c.err)); got != c.want {
			t.Errorf("uncertain(%v) = %v, want %v", lk.fail(c.err), got, c.want)
		}
	}
	for _, err := range []error{nil, lockswap.ErrLost, errClosedLost, closedBecause(lk.fail(context.DeadlineExceeded))} {
		if uncertain(err) {
			t.Errorf("uncertain(%v) = true, want false: not an etcd request's failure", err)
		}
	}
}
