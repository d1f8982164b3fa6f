package servers

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// DevEtcdOptions configures StartDevEtcd.
type DevEtcdOptions struct {
	// ClientAddr is the host:port clients connect to, such as
	// "127.0.0.1:2379".
	ClientAddr string
	// Dir keeps the data; empty means a temporary directory removed by
	// Close.
	Dir string
}

// StartDevEtcd starts a single-member embedded etcd for trying lockswap
// (lockswap dev etcd): clients on opts.ClientAddr, its peer port on a free
// loopback port, etcd's default timing and fsync (unlike the test members),
// quiet logs. It waits until the member is ready, bounded by ctx. Call
// Close to stop it.
func StartDevEtcd(ctx context.Context, opts DevEtcdOptions) (*Etcd, error) {
	if _, _, err := net.SplitHostPort(opts.ClientAddr); err != nil {
		return nil, fmt.Errorf("servers: client address %q: %w", opts.ClientAddr, err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	dir, temp := opts.Dir, opts.Dir == ""
	if temp {
		if dir, err = os.MkdirTemp("", "lockswap-dev-etcd-"); err != nil {
			return nil, fmt.Errorf("servers: etcd temp dir: %w", err)
		}
	}
	client := url.URL{Scheme: "http", Host: opts.ClientAddr}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	cfg := embed.NewConfig()
	cfg.Name = "lockswap-dev"
	cfg.Dir = dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	if os.Getenv(EtcdLogEnv) != "1" {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	removeDir := func() {
		if temp {
			os.RemoveAll(dir)
		}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		removeDir()
		return nil, fmt.Errorf("servers: start etcd on %s: %w", opts.ClientAddr, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		removeDir()
		return nil, fmt.Errorf("servers: etcd on %s failed: %w", opts.ClientAddr, err)
	case <-ctx.Done():
		e.Close()
		removeDir()
		return nil, fmt.Errorf("servers: etcd on %s not ready: %w", opts.ClientAddr, ctx.Err())
	}
	srv := &Etcd{Member: e, endpoints: []string{client.String()}}
	if temp {
		srv.dir = dir
	}
	return srv, nil
}
