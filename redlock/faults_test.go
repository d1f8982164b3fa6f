package redlock_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// TestFaults: every call keeps its deadline when every master stops
// answering, is paused or answers late, on every client (go-redis with its
// default options too, which ignores contexts by itself). The Lockers use
// the default, adaptive, instance timeout: a fixed one (100 ms) failed the
// TryAcquire before the fault on a loaded machine (issue 27).
func TestFaults(t *testing.T) {
	redistest.RunFaults(t, 3, time.Second, func(t *testing.T, clients []redisclient.Client) lockswap.Locker {
		lk, err := redlock.New(clients, redlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return lk
	})
}
