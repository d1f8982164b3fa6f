package memlock_test

import (
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/memlock"
)

// TestLocalQueue runs the shared checks of the local queue
// (internal/queuetest) on Lockers of one Store: arrival order with
// wake-ups by release, for the mutex and for permits, fairness of 8
// goroutines cycling on one key, and Close.
func TestLocalQueue(t *testing.T) {
	store := memlock.NewStore()
	s := queuetest.Subject{
		NewLocker: func(t *testing.T) lockswap.Locker {
			lk := memlock.New(store)
			t.Cleanup(func() { lk.Close() })
			return lk
		},
		Waiting: func(lk lockswap.Locker, key string) int { return lk.(*memlock.Locker).Waiting(key) },
	}
	t.Run("fifo", func(t *testing.T) { queuetest.FIFO(t, s) })
	t.Run("fairness", func(t *testing.T) { queuetest.Fairness(t, s) })
	t.Run("close", func(t *testing.T) { queuetest.CloseEndsWaits(t, s) })
	t.Run("permit-fifo", func(t *testing.T) { queuetest.PermitFIFO(t, s) })
}
