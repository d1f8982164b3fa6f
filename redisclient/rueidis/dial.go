package rueidis

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=rueidis available to Redis URLs opened
// through package registry or backend.
func init() { registry.RegisterRedisClient("rueidis", dial) }

// dial makes a client of one server. rueidis connects when the client is
// made (NewClient dials and says HELLO, up to the dial timeout, under a
// context of its own), so the open's ctx is brought in two ways while
// NewClient runs: the dial itself runs under ctx (opening), and ctx's end
// closes the connections made so far (conns), which fails the handshake
// at once. A client made while ctx ended is closed, and dial fails with
// ctx's error. Nothing of it runs on once dial returned.
func dial(ctx context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("rueidis %s/%d: %w", s.Addr, s.DB, err)
	}
	conns := new(adapt.Conns)
	var opening atomic.Pointer[context.Context]
	opening.Store(&ctx)
	ended := make(chan struct{})
	rising := new(atomic.Int32) // the adapter's: connections coming up
	stop := context.AfterFunc(ctx, func() {
		defer close(ended)
		conns.Close()
	})
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.Addr}, Username: s.Username, Password: s.Password, SelectDB: s.DB,
		TLSConfig: s.TLS, Dialer: net.Dialer{Timeout: s.DialTimeout},
		// Every connection recorded, for Close (see closer).
		DialCtxFn: func(dctx context.Context, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
			// The context the handshake watches (watchHandshake): the
			// command's. NewClient's own dial has one that cannot be
			// cancelled; the open's ctx ends it by closing conns.
			watch := dctx
			if octx := opening.Load(); octx != nil {
				// NewClient's own dial, under a context of its own
				// without a cancel: the open's ctx instead, with the
				// same deadline if any.
				var cancel context.CancelFunc = func() {}
				if dl, ok := dctx.Deadline(); ok {
					dctx, cancel = context.WithDeadline(*octx, dl)
				} else {
					dctx = *octx
				}
				defer cancel()
			}
			rising.Add(1)
			nc, err := dialTracked(dctx, conns, dst, d, tlsConfig)
			if err != nil {
				rising.Add(-1)
				return nil, err
			}
			return watchHandshake(watch, nc, func() { rising.Add(-1) }), nil
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
	opening.Store(nil)
	if !stop() {
		// ctx ended while the client was made: its connections are
		// closed (wait for that), and so is the client.
		<-ended
		if c != nil {
			closer{c, conns}.Close()
		}
		return nil, nil, fmt.Errorf("rueidis %s/%d: connect: %w", s.Addr, s.DB, ctx.Err())
	}
	if c == nil {
		conns.Close()
		return nil, nil, fmt.Errorf("rueidis %s/%d: %w", s.Addr, s.DB, err)
	}
	a := NewNamed(c, fmt.Sprintf("%s/%d", s.Addr, s.DB)).(*adapter)
	a.pipelined = true // AlwaysPipelining, above
	a.rising = rising
	return a, closer{c, conns}, nil
}

// dialTracked dials dst as rueidis does by default, and records the
// connection in conns.
func dialTracked(ctx context.Context, conns *adapt.Conns, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
	if conns.Closed() {
		return nil, adapt.ErrClosed
	}
	nc, err := dialDefault(ctx, dst, d, tlsConfig)
	if err != nil {
		return nil, err
	}
	return conns.Track(nc)
}

// dialDefault dials dst as rueidis does by default, bounded by ctx.
func dialDefault(ctx context.Context, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok && ctx.Done() == nil {
		// The TLS handshake watches Done only: the kit's request under
		// a caller that cannot be cancelled has a deadline and no Done.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
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
	return nc, err
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
