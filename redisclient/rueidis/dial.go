package rueidis

import (
	"fmt"
	"io"
	"net"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/registry"
)

// Importing the package makes client=rueidis available to Redis URLs opened
// through package registry or backend.
func init() { registry.RegisterRedisClient("rueidis", dial) }

func dial(s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.Addr}, Username: s.Username, Password: s.Password, SelectDB: s.DB,
		TLSConfig: s.TLS, Dialer: net.Dialer{Timeout: s.DialTimeout},
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
		return nil, nil, fmt.Errorf("rueidis %s/%d: %w", s.Addr, s.DB, err)
	}
	return NewNamed(c, fmt.Sprintf("%s/%d", s.Addr, s.DB)), closer{c}, nil
}

// closer closes a rueidis client, which has no error to return.
type closer struct{ c rueidis.Client }

func (c closer) Close() error {
	c.c.Close()
	return nil
}
