package lockswap_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// TestRWOptionsResolve: WithRead and WithWrite set the mode; both at once,
// either with WithPermits, and a mode out of range are refused with
// ErrInvalid; without them a call is the mutex's.
func TestRWOptionsResolve(t *testing.T) {
	for want, opt := range map[lockswap.RWMode]lockswap.Option{lockswap.ReadHold: lockswap.WithRead(), lockswap.WriteHold: lockswap.WithWrite()} {
		if o, err := (lockswap.Options{}).Resolve(opt); err != nil || o.RW != want {
			t.Errorf("%v option: RW %v, %v", want, o.RW, err)
		}
		if _, err := (lockswap.Options{}).Resolve(opt, lockswap.WithPermits(2)); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%v with WithPermits: %v, want ErrInvalid", want, err)
		}
	}
	for _, opts := range [][]lockswap.Option{
		{lockswap.WithRead(), lockswap.WithWrite()},
		{lockswap.WithWrite(), lockswap.WithRead()},
	} {
		if _, err := (lockswap.Options{}).Resolve(opts...); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("WithRead and WithWrite: %v, want ErrInvalid", err)
		}
	}
	if _, err := (lockswap.Options{RW: 9}).Resolve(); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Options{RW: 9}: %v, want ErrInvalid", err)
	}
	if o, err := (lockswap.Options{}).Resolve(); err != nil || o.RW != lockswap.NotRW {
		t.Errorf("no option: RW %v, %v; want the mutex", o.RW, err)
	}
	for m, want := range map[lockswap.RWMode]string{lockswap.NotRW: "mutex", lockswap.ReadHold: "read", lockswap.WriteHold: "write", 7: "RWMode(7)"} {
		if got := m.String(); got != want {
			t.Errorf("RWMode(%d).String() = %q, want %q", m, got, want)
		}
	}
}

// TestModeOfThroughWrapper: ModeOf finds a hold's mode through wrappers
// that unwrap, and says NotRW for a mutex's lock and for nil.
func TestModeOfThroughWrapper(t *testing.T) {
	ctx := context.Background()
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	r, err := lk.TryAcquire(ctx, "doc", lockswap.WithRead())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	if m := lockswap.ModeOf(unwrapping{unwrapping{r}}); m != lockswap.ReadHold {
		t.Errorf("ModeOf through two wrappers = %v, want read", m)
	}
	m, err := lk.TryAcquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release(ctx)
	if got := lockswap.ModeOf(m); got != lockswap.NotRW {
		t.Errorf("ModeOf(a mutex's lock) = %v, want mutex", got)
	}
	if got := lockswap.ModeOf(nil); got != lockswap.NotRW {
		t.Errorf("ModeOf(nil) = %v, want mutex", got)
	}
}

// Read holds share a key; the write hold waits for them.
func ExampleWithRead() {
	ctx := context.Background()
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	r1, _ := lk.TryAcquire(ctx, "catalog", lockswap.WithRead())
	r2, _ := lk.TryAcquire(ctx, "catalog", lockswap.WithRead())
	_, err := lk.TryAcquire(ctx, "catalog", lockswap.WithWrite())
	fmt.Println("write while two readers hold:", errors.Is(err, lockswap.ErrHeld))
	r1.Release(ctx)
	r2.Release(ctx)
	w, err := lk.TryAcquire(ctx, "catalog", lockswap.WithWrite())
	fmt.Println("write once they released:", err, lockswap.ModeOf(w))
	w.Release(ctx)
	// Output:
	// write while two readers hold: true
	// write once they released: <nil> write
}
