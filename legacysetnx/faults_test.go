package legacysetnx_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
)

// TestFaults runs the promise matrix: every call keeps its bound, and its
// error has the right class, under every fault, on every client, whatever
// the context.
func TestFaults(t *testing.T) {
	redistest.RunMatrix(t, redistest.Backend{N: 1, TTL: 2 * time.Second,
		NewLocker: func(t *testing.T, clients []redisclient.Client) lockswap.Locker {
			lk, err := legacysetnx.New(clients[0], legacysetnx.Options{Unit: legacysetnx.Milliseconds})
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		URL: func(hosts []string) string { return "legacysetnx://" + hosts[0] + "?unit=ms" },
	})
}
