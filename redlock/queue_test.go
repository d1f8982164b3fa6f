package redlock_test

import (
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redlock"
)

// TestLocalQueue: goroutines of one Locker waiting for a key get it in
// arrival order, are woken by a release through the Locker, and share a
// contended key fairly (internal/queuetest), on 3 real redis-servers.
func TestLocalQueue(t *testing.T) {
	addrs, _ := realN(t, 3)
	for _, c := range redistest.Clients {
		s := queuetest.Subject{
			NewLocker: func(t *testing.T) lockswap.Locker {
				return newLocker(t, addrs, c.New, redlock.Options{Prefix: "queue:"})
			},
			Waiting: func(lk lockswap.Locker, key string) int { return redlock.Waiting(lk.(*redlock.Locker), key) },
		}
		t.Run(c.Name+"/fifo", func(t *testing.T) { queuetest.FIFO(t, s) })
		t.Run(c.Name+"/fairness", func(t *testing.T) { queuetest.Fairness(t, s) })
		t.Run(c.Name+"/close", func(t *testing.T) { queuetest.CloseEndsWaits(t, s) })
	}
}
