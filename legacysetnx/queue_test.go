package legacysetnx_test

import (
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// TestLocalQueue: goroutines of one Locker waiting for a key get it in
// arrival order, are woken by a release through the Locker, and share a
// contended key fairly (internal/queuetest).
func TestLocalQueue(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		s := queuetest.Subject{
			NewLocker: func(t *testing.T) lockswap.Locker {
				return newLocker(t, c.New, srv.Addr(), legacysetnx.Options{Unit: legacysetnx.Seconds, Prefix: "queue:"})
			},
			Waiting: func(lk lockswap.Locker, key string) int { return legacysetnx.Waiting(lk.(*legacysetnx.Locker), key) },
		}
		t.Run(c.Name+"/fifo", func(t *testing.T) { queuetest.FIFO(t, s) })
		t.Run(c.Name+"/fairness", func(t *testing.T) { queuetest.Fairness(t, s) })
		t.Run(c.Name+"/close", func(t *testing.T) { queuetest.CloseEndsWaits(t, s) })
	}
}
