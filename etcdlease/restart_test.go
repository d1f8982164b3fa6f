package etcdlease

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestServerRestartKeepsLock: a held lock survives a restart of its etcd
// server from the same data directory (SurvivesRestart: etcd persists keys
// and leases). The server is started here, not by testserver, to restart it
// in place.
func TestServerRestartKeepsLock(t *testing.T) {
	ports, err := testserver.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := func() *embed.Etcd {
		cfg := embed.NewConfig()
		cfg.Dir = dir
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.TickMs, cfg.ElectionMs = 10, 100
		cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
		pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
		cfg.InitialCluster = cfg.Name + "=" + pu.String()
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(20 * time.Second):
			e.Close()
			t.Fatal("etcd not ready")
		}
		return e
	}
	e := start()
	endpoints := []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}
	ctx := ctxT(t, 30*time.Second)
	a, b := openT(t, endpoints, "restart/"), openT(t, endpoints, "restart/")
	if !a.Guarantees().SurvivesRestart {
		t.Fatal("Guarantees: SurvivesRestart is false")
	}
	l, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	e = start()
	defer e.Close()
	if _, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second)); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("after the server restarted another client got %v, want ErrHeld", err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend after the restart: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the restart: %v", err)
	}
	nl, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	nl.Release(ctx)
	a.Close() // while the server runs, so that revoking is quick
	b.Close()
}
