package servers

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// EtcdUser is a user of an etcd started by StartEtcdTLS, allowed to read
// and write the keys under Prefix only.
type EtcdUser struct {
	Name, Password, Prefix string
}

// EtcdTLSOptions configures StartEtcdTLS.
type EtcdTLSOptions struct {
	// CA signs the server's certificate and, with ClientCertAuth, is the
	// CA client certificates must come from.
	CA *CA
	// ClientCertAuth makes the server require a client certificate.
	ClientCertAuth bool
	// Users, when set, are created (each with a role of its own name that
	// may read and write its prefix), with a root user of password
	// RootPassword, and authentication is enabled.
	Users        []EtcdUser
	RootPassword string
}

// StartEtcdTLS starts a single-member embedded etcd that serves clients
// over TLS only (https://127.0.0.1:port) with a certificate for the
// loopback addresses signed by opts.CA, and sets up opts.Users. Call
// Close to stop it.
func StartEtcdTLS(opts EtcdTLSOptions) (*Etcd, error) {
	if opts.CA == nil {
		return nil, fmt.Errorf("servers: StartEtcdTLS needs a CA")
	}
	kp, err := opts.CA.Issue(fmt.Sprintf("etcd-server-%d", serial().Int64()%1e6), true)
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < etcdStartAttempts; attempt++ {
		e, err := startEtcdTLS(opts, kp)
		if err == nil {
			return e, nil
		}
		last = err
		if !isAddrInUse(err) {
			break
		}
	}
	return nil, last
}

func startEtcdTLS(opts EtcdTLSOptions, kp KeyPair) (*Etcd, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockswap-etcd-tls-")
	if err != nil {
		return nil, fmt.Errorf("servers: etcd temp dir: %w", err)
	}
	spec := memberSpec{
		name: "tls", dir: dir,
		clientURL: url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])},
		peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])},
		tok:       fmt.Sprintf("lockswap-tls-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	spec.initialCluster = spec.name + "=" + spec.peerURL.String()
	cfg := newMemberConfig(spec)
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: kp.CertFile, KeyFile: kp.KeyFile}
	if opts.ClientCertAuth {
		// etcd asks for a client certificate whenever it has a trusted
		// CA, so the CA is given only when client certificates are wanted.
		cfg.ClientTLSInfo.TrustedCAFile = opts.CA.CertFile
		cfg.ClientTLSInfo.ClientCertAuth = true
	}
	// Passwords are hashed with bcrypt's lowest cost: the default (10)
	// takes seconds per authentication under -race.
	cfg.BcryptCost = 4
	m, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: start etcd with TLS: %w", err)
	}
	e := &Etcd{Member: m, dir: dir, endpoints: []string{spec.clientURL.String()}}
	select {
	case <-m.Server.ReadyNotify():
	case err := <-m.Err():
		e.Close()
		return nil, fmt.Errorf("servers: etcd with TLS failed: %w", err)
	case <-time.After(etcdReadyTimeout):
		e.Close()
		return nil, fmt.Errorf("servers: etcd with TLS not ready after %s", etcdReadyTimeout)
	}
	if len(opts.Users) > 0 {
		if err := setUpEtcdAuth(e, opts); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// setUpEtcdAuth creates root and opts.Users with their roles and enables
// authentication. It connects with a client certificate (from the server's
// own CA) in case the server requires one.
func setUpEtcdAuth(e *Etcd, opts EtcdTLSOptions) error {
	cert, err := opts.CA.Issue(fmt.Sprintf("etcd-admin-%d", serial().Int64()%1e6), false)
	if err != nil {
		return err
	}
	pair, err := cert.TLSCertificate()
	if err != nil {
		return err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second,
		TLS: &tls.Config{RootCAs: opts.CA.Pool(), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		return fmt.Errorf("servers: etcd admin client: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", opts.RootPassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
	}
	for _, u := range opts.Users {
		u := u
		steps = append(steps,
			func() error { _, err := c.RoleAdd(ctx, u.Name); return err },
			func() error {
				_, err := c.RoleGrantPermission(ctx, u.Name, u.Prefix, clientv3.GetPrefixRangeEnd(u.Prefix), clientv3.PermissionType(clientv3.PermReadWrite))
				return err
			},
			func() error { _, err := c.UserAdd(ctx, u.Name, u.Password); return err },
			func() error { _, err := c.UserGrantRole(ctx, u.Name, u.Name); return err },
		)
	}
	steps = append(steps, func() error { _, err := c.AuthEnable(ctx); return err })
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("servers: etcd auth set-up: %w", err)
		}
	}
	return nil
}
