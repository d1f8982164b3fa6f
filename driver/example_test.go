package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/driver"
)

// This file is a whole third-party backend: a driver for a toy key-value
// server that offers compare-and-swap (standing in for a real service),
// the constructor that gives users a lockswap.Locker, and its conformance
// test. docs/backends.md walks through it.

// KV is the toy server: key → record, changed only by compare-and-swap.
type KV struct{ m sync.Map }

type record struct {
	token   string
	expires time.Time
}

// kvDriver speaks the lock protocol to a KV: all a backend has to write.
type kvDriver struct{ kv *KV }

func (d kvDriver) Acquire(_ context.Context, c *driver.Claim[struct{}]) (driver.Grant, error) {
	mine := record{c.Token, time.Now().Add(c.TTL)}
	for {
		old, held := d.kv.m.LoadOrStore(c.Key, mine)
		switch {
		case !held:
			return driver.Grant{}, nil
		case time.Now().Before(old.(record).expires):
			return driver.Grant{}, lockswap.ErrHeld
		case d.kv.m.CompareAndSwap(c.Key, old, mine): // took over an expired lock
			return driver.Grant{}, nil
		}
	}
}

func (d kvDriver) Extend(_ context.Context, c *driver.Claim[struct{}], ttl time.Duration) (driver.Grant, error) {
	old, ok := d.kv.m.Load(c.Key)
	if !ok || old.(record).token != c.Token || !time.Now().Before(old.(record).expires) ||
		!d.kv.m.CompareAndSwap(c.Key, old, record{c.Token, time.Now().Add(ttl)}) {
		return driver.Grant{}, lockswap.ErrLost
	}
	return driver.Grant{}, nil
}

func (d kvDriver) Release(_ context.Context, c *driver.Claim[struct{}]) error {
	old, ok := d.kv.m.Load(c.Key)
	if !ok || old.(record).token != c.Token || !d.kv.m.CompareAndDelete(c.Key, old) {
		return fmt.Errorf("taken over: %w", lockswap.ErrLost)
	}
	if !time.Now().Before(old.(record).expires) {
		return fmt.Errorf("expired before release: %w", lockswap.ErrLost)
	}
	return nil
}

// NewKVLocker is the backend's constructor: the kit builds the Locker.
func NewKVLocker(kv *KV) (*driver.Locker[struct{}], error) {
	return driver.New[struct{}](kvDriver{kv}, driver.Config{
		Name: "kvlock",
		Guarantees: lockswap.Guarantees{Backend: "kvlock", Clock: lockswap.ClockNone, Nodes: 1,
			StaleReleaseSafe: true, Wait: lockswap.WaitPoll},
		Retry: lockswap.ConstantRetry(5 * time.Millisecond),
		Queue: true,
	})
}

// The backend's conformance test: the whole suite, against its own store.
func TestKVConformance(t *testing.T) {
	kv := &KV{}
	conformance.Run(t, conformance.Harness{
		NewLocker: func(t *testing.T) lockswap.Locker {
			lk, err := NewKVLocker(kv)
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		TTL: 500 * time.Millisecond, // long enough for Do to renew on a loaded machine
	})
}

func Example() {
	kv := &KV{}
	a, _ := NewKVLocker(kv)
	b, _ := NewKVLocker(kv)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	l, err := a.TryAcquire(ctx, "report", lockswap.WithTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	_, err = b.TryAcquire(ctx, "report")
	fmt.Println(err, errors.Is(err, lockswap.ErrHeld))
	fmt.Println("release:", l.Release(ctx))
	// Output:
	// kvlock: acquire "report": lock held by another owner true
	// release: <nil>
}
