package rueidis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
)

// NewClient makes a rueidis client from opt as lockswap needs it for
// locks that cost no more than the client's own commands, and returns the
// client, for the program's other commands too, with its adapter. The
// caller closes the client when done (the adapter has nothing to close).
//
// It sets ClientOption.AlwaysPipelining (a request whose context ends
// gives up alone, instead of closing the connection under other callers'
// requests; see the package doc) and watches each connection's handshake
// under the context of the command that dials it (opt.DialCtxFn or
// DialFn, when set, still dials). The adapter then leaves a command with
// a deadline to rueidis, which watches its cancellation: no hand-over
// per command, where an adapter from [New] or [NewNamed], which cannot
// tell how its client was made, pays a hand-over to a worker goroutine
// and a channel for every command that can be cancelled. A DialCtxFn of opt's must return when
// its context ends. The adapter watches every command itself, as New's
// does, where it cannot leave them to rueidis: with DisableAutoPipelining
// (rueidis then turns AlwaysPipelining off), with the deprecated DialFn
// (it cannot be cancelled), and for a cluster or sentinel client (it
// finds its nodes with requests of its own).
//
// As with rueidis.NewClient, a client made with ForceSingleClient whose
// server did not answer is returned together with the dial's error (it
// dials again on use); the caller closes it as any other.
//
// The adapter's address, its identity for redlock and migrate
// ([redisclient.Client.Addr]), is opt's single InitAddress and SelectDB
// when the client is of one server (ForceSingleClient, or a server that
// is not a cluster), and unknown otherwise, as with [New].
func NewClient(opt rueidis.ClientOption) (rueidis.Client, redisclient.Client, error) {
	opt.AlwaysPipelining = true
	// The dialer rueidis would use: opt's own (DialCtxFn before the
	// deprecated DialFn, as rueidis picks), else the default.
	dialWith := opt.DialCtxFn
	contextBlind := dialWith == nil && opt.DialFn != nil
	if contextBlind {
		dialFn := opt.DialFn
		dialWith = func(_ context.Context, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
			return dialFn(dst, d, tlsConfig)
		}
	}
	if dialWith == nil {
		dialWith = dialDefault
	}
	rising := new(atomic.Int32)
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, tlsConfig *tls.Config) (net.Conn, error) {
		rising.Add(1)
		nc, err := dialWith(ctx, dst, d, tlsConfig)
		if err != nil {
			rising.Add(-1)
			return nil, err
		}
		return watchHandshake(ctx, nc, func() { rising.Add(-1) }), nil
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		err = fmt.Errorf("rueidis: %w", err)
	}
	if c == nil {
		return nil, nil, err
	}
	var a *adapter
	if len(opt.InitAddress) == 1 && c.Mode() == rueidis.ClientModeStandalone {
		a = NewNamed(c, fmt.Sprintf("%s/%d", opt.InitAddress[0], opt.SelectDB)).(*adapter)
	} else {
		a = New(c).(*adapter)
	}
	// DisableAutoPipelining turns AlwaysPipelining off in rueidis, and a
	// cluster or sentinel client finds its nodes with requests of its own
	// that no context of the caller's bounds: the adapter then watches
	// every command itself, as New's.
	// The deprecated DialFn does not take the command's context: a
	// command dialing through it could not be cancelled.
	a.pipelined = !opt.DisableAutoPipelining && c.Mode() == rueidis.ClientModeStandalone && !contextBlind
	a.rising = rising
	return c, a, err
}
