package redlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// TestFaults runs the promise matrix: every call keeps its bound, and its
// error has the right class, when every master stops answering, is
// paused, answers late, refuses or resets connections, or speaks plain
// text to TLS, on every client (go-redis with its default options too,
// which ignores contexts by itself), whatever the context. The Lockers use
// the default, adaptive, instance timeout: a fixed one (100 ms) failed the
// TryAcquire before the fault on a loaded machine (issue 27).
func TestFaults(t *testing.T) {
	redistest.RunMatrix(t, redistest.Backend{N: 3, TTL: time.Second,
		NewLocker: func(t *testing.T, clients []redisclient.Client) lockswap.Locker {
			lk, err := redlock.New(clients, redlock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		URL: func(hosts []string) string { return "redlock://" + strings.Join(hosts, ",") },
	})
}
