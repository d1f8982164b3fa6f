package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// undecided is a driver whose Release never learns its outcome: it
// returns release's error, and counts its calls.
type undecided struct {
	release  func() error
	releases atomic.Int32
}

func (d *undecided) Acquire(context.Context, *driver.Claim[struct{}]) (driver.Grant, error) {
	return driver.Grant{}, nil
}

func (d *undecided) Extend(context.Context, *driver.Claim[struct{}], time.Duration) (driver.Grant, error) {
	return driver.Grant{}, nil
}

func (d *undecided) Release(context.Context, *driver.Claim[struct{}]) error {
	d.releases.Add(1)
	return d.release()
}

// TestGaveUp: a Release error wrapped by driver.GaveUp ends the lock
// (Done closes, Extend reports it lost), is returned with the kit's
// prefix and still matches its sentinel, and makes a second Release do
// nothing; without GaveUp the same error leaves the lock held and a
// second Release asks the driver again.
func TestGaveUp(t *testing.T) {
	outage := fmt.Errorf("2 of 3 instances did not answer: %w", lockswap.ErrUnavailable)
	for _, tc := range []struct {
		name  string
		err   error
		ended bool
	}{
		{"GaveUp", driver.GaveUp(outage), true},
		{"plain", outage, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &undecided{release: func() error { return tc.err }}
			lk, err := driver.New[struct{}](d, driver.Config{Name: "fake", Guarantees: lockswap.Guarantees{Backend: "fake"}})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			ctx := context.Background()
			l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			err = l.Release(ctx)
			if !errors.Is(err, lockswap.ErrUnavailable) || !strings.HasPrefix(err.Error(), `fake: release "k": `) || !strings.Contains(err.Error(), "did not answer") {
				t.Fatalf("Release: %v, want the driver's ErrUnavailable with the kit's prefix", err)
			}
			select {
			case <-l.Done():
				if !tc.ended {
					t.Error("Done closed by a Release error that is not GaveUp")
				}
			default:
				if tc.ended {
					t.Error("Done still open after a GaveUp Release")
				}
			}
			if err := l.Extend(ctx, time.Minute); tc.ended != errors.Is(err, lockswap.ErrLost) {
				t.Errorf("Extend after the Release: %v, want ErrLost: %v", err, tc.ended)
			}
			err = l.Release(ctx)
			switch n := d.releases.Load(); {
			case tc.ended && (err != nil || n != 1):
				t.Errorf("second Release: %v after %d driver calls, want nil and 1 call", err, n)
			case !tc.ended && (!errors.Is(err, lockswap.ErrUnavailable) || n != 2):
				t.Errorf("second Release: %v after %d driver calls, want ErrUnavailable and 2 calls", err, n)
			}
		})
	}
}
