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

// noPanic runs fn and returns its error, or the panic it raised as one.
func noPanic(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn()
}

// TestNilContext: Acquire, TryAcquire, Extend and Release with a nil
// context return ErrInvalid naming ctx, without a panic and without a
// request to the driver: the lock stays held.
func TestNilContext(t *testing.T) {
	var acquires atomic.Int64
	f := &fake{acquire: func(context.Context, *driver.Claim[int]) (driver.Grant, error) {
		acquires.Add(1)
		return driver.Grant{}, nil
	}}
	lk := newLocker(t, f, driver.Config{Queue: true})
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "ctx is a nil context.Context") || !strings.Contains(err.Error(), "fake") {
			t.Errorf("%s with a nil context: %v, want ErrInvalid naming ctx and the backend", what, err)
		}
	}
	var nilCtx context.Context
	check("Acquire", noPanic(func() error { _, err := lk.Acquire(nilCtx, "k"); return err }))
	check("TryAcquire", noPanic(func() error { _, err := lk.TryAcquire(nilCtx, "k"); return err }))
	if n := acquires.Load(); n != 0 {
		t.Errorf("the driver was asked %d times", n)
	}
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	check("Extend", noPanic(func() error { return l.Extend(nilCtx, time.Minute) }))
	check("Release", noPanic(func() error { return l.Release(nilCtx) }))
	if n := f.released.Load(); n != 0 {
		t.Errorf("Release with a nil context sent %d release requests", n)
	}
	select {
	case <-l.Done():
		t.Fatal("the lock ended after the refused calls")
	default:
	}
	if err := l.Release(ctx); err != nil || f.released.Load() != 1 {
		t.Errorf("Release: %v after %d requests", err, f.released.Load())
	}
}
