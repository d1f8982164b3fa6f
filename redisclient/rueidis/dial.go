package rueidis

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=rueidis available to Redis URLs opened
// through package registry or backend.
func init() { registry.RegisterRedisClient("rueidis", dial) }

func dial(s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	conns := new(adapt.Conns)
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.Addr}, Username: s.Username, Password: s.Password, SelectDB: s.DB,
		TLSConfig: s.TLS, Dialer: net.Dialer{Timeout: s.DialTimeout},
		// Every connection recorded, for Close (see closer).
		DialCtxFn: func(ctx context.Context, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
			return dialTracked(ctx, conns, dst, d, tlsConfig)
		},
		// One server: no cluster discovery. The client is made even when
		// the server does not answer yet (it dials again on use), as the
		// other clients' pools do: a Redlock instance that is down must
		// not keep the others from being used.
		ForceSingleClient: true,
		// The backends decide what to retry (an unanswered acquire is
		// undone, not sent again).
		DisableRetry: true,
		// Locks do not use client-side caching.
		DisableCache: true,
		// Every request through the connection's writer: a request whose
		// deadline passes gives up alone, where rueidis would otherwise
		// close the connection under the others (see the package doc).
		AlwaysPipelining: true,
	})
	if c == nil {
		conns.Close()
		return nil, nil, fmt.Errorf("rueidis %s/%d: %w", s.Addr, s.DB, err)
	}
	return NewNamed(c, fmt.Sprintf("%s/%d", s.Addr, s.DB)), closer{c, conns}, nil
}

// dialTracked dials dst as rueidis does by default, and records the
// connection in conns.
func dialTracked(ctx context.Context, conns *adapt.Conns, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
	if conns.Closed() {
		return nil, adapt.ErrClosed
	}
	var (
		nc  net.Conn
		err error
	)
	if tlsConfig != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(ctx, "tcp", dst)
	} else {
		nc, err = d.DialContext(ctx, "tcp", dst)
	}
	if err != nil {
		return nil, err
	}
	return conns.Track(nc)
}

// closer closes a rueidis client that a URL opened, which has no error
// to return. rueidis's own Close says goodbye on each connection (a PING
// it waits for) and closes a connection whose server does not answer
// only after a second, one connection after the other: a second or more
// with a hung server, while requests in flight wait for their deadlines.
// The connections are closed first instead: every request in flight
// fails at once, each connection's goroutines stop, and the client's
// Close has nothing left to wait for.
type closer struct {
	c     rueidis.Client
	conns *adapt.Conns
}

func (c closer) Close() error {
	c.conns.Close()
	c.c.Close()
	return nil
}
