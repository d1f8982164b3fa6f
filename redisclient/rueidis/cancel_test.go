package rueidis_test

import (
	"context"
	"io"
	"testing"

	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
)

// TestCancelHung: a command returns soon after its context (without a
// deadline, or with one far off) is cancelled, with the server hung,
// before and after the connection is up.
func TestCancelHung(t *testing.T) {
	stalltest.RunCancelHung(t, rueidis.Dial, nil)
}

// TestSubscribeHung: Subscribe returns soon after its context ends (its
// deadline passes or it is cancelled), with the server hung, before and
// after the connection is up.
func TestSubscribeHung(t *testing.T) { stalltest.RunSubscribeHung(t, rueidis.Dial) }

// TestCancelBeforeDeadline: a command whose context is cancelled long
// before its deadline returns soon after the cancellation, with the
// server hung, on a client made without AlwaysPipelining (given to New),
// which runs a command alone on its connection with the deadline on the
// socket and did not watch the cancellation. (A client Dial made
// pipelines always: TestCancelHung.)
func TestCancelBeforeDeadline(t *testing.T) {
	stalltest.RunCancelBeforeDeadline(t, dialPlain)
}

// dialPlain makes a rueidis client with the options of client=rueidis
// URLs but AlwaysPipelining, and adapts it with NewNamed.
func dialPlain(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	c, err := rueidislib.NewClient(rueidislib.ClientOption{InitAddress: []string{s.Addr},
		ForceSingleClient: true, DisableRetry: true, DisableCache: true})
	if err != nil {
		return nil, nil, err
	}
	return rueidis.NewNamed(c, s.Addr), closerFunc(c.Close), nil
}

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// TestCancelTLSHung: a command whose connection is still in its TLS
// handshake with a server that never answers returns soon after its
// context is cancelled.
func TestCancelTLSHung(t *testing.T) { stalltest.RunCancelTLSHung(t, rueidis.Dial) }
