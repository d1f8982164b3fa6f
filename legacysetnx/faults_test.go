package legacysetnx_test

import (
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
)

// TestFaults: every call keeps its deadline when Redis stops answering, is
// paused or answers late, on every client.
func TestFaults(t *testing.T) {
	redistest.RunFaults(t, 1, 2*time.Second, func(t *testing.T, clients []redisclient.Client) lockswap.Locker {
		lk, err := legacysetnx.New(clients[0], legacysetnx.Options{Unit: legacysetnx.Milliseconds})
		if err != nil {
			t.Fatal(err)
		}
		return lk
	})
}
