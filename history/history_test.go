package history_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/memlock"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestLockedHistoryIsLinearizable: four clients of one lock service take
// two keys in turn; the history of their sections is linearizable, every
// section wrote, and the registers count them all. Written as JSON lines
// and read back, it is the same history and checks the same.
func TestLockedHistoryIsLinearizable(t *testing.T) {
	ctx := ctxT(t)
	store := memlock.NewStore()
	var lks []lockswap.Locker
	for range 4 {
		lk := memlock.New(store)
		defer lk.Close()
		lks = append(lks, lk)
	}
	rec, reg := history.NewRecorder(), history.NewRegister(true)
	w := history.Workload{Lockers: lks, Keys: []string{"a", "b"}, Sections: 50, Register: reg, Recorder: rec,
		Between: func(context.Context, int, lockswap.Lock) { runtime.Gosched() }}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	ops := rec.Ops()
	if len(ops) != 200 {
		t.Fatalf("%d sections recorded, want 200", len(ops))
	}
	for _, op := range ops {
		if !op.Wrote || op.Fence == 0 {
			t.Fatalf("section %+v: want written, with memlock's fence", op)
		}
	}
	if n := reg.Value("a") + reg.Value("b"); n != 200 {
		t.Fatalf("the registers count %d increments, want 200", n)
	}
	if r, err := history.Check(ops, time.Minute); err != nil || !r.Linearizable || r.Fences != nil {
		t.Fatalf("a correct lock's history: %+v, %v", r, err)
	}
	var buf bytes.Buffer
	if err := history.WriteJSONL(&buf, ops); err != nil {
		t.Fatal(err)
	}
	back, err := history.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, ops) {
		t.Fatal("the history read back differs from the one written")
	}
}

// TestSecondHolderIsCaught: two clients of two lock services that do not
// know each other (a split brain) both hold "k"; the second reads after the
// first read and before it wrote, so both write 1: a lost update, which
// Check reports on that key, with a view of it.
func TestSecondHolderIsCaught(t *testing.T) {
	ctx := ctxT(t)
	a, b := memlock.New(memlock.NewStore()), memlock.New(memlock.NewStore())
	defer a.Close()
	defer b.Close()
	rec, reg := history.NewRecorder(), history.NewRegister(false)
	la, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	history.Section(ctx, rec, reg, 0, la, func(ctx context.Context) {
		history.Section(ctx, rec, reg, 1, lb, nil) // the second holder, between the first's read and write
	})
	if v := reg.Value("k"); v != 1 {
		t.Fatalf("the register holds %d after the lost update, want 1", v)
	}
	r, err := history.Check(rec.Ops(), time.Minute)
	if err != nil || r.Linearizable || !slices.Equal(r.Violations, []string{"k"}) {
		t.Fatalf("two holders at once, a lost update: %+v, want a violation on k", r)
	}
	var html bytes.Buffer
	if err := r.Visualize("k", &html); err != nil || !strings.Contains(html.String(), "read 0, wrote 1") {
		t.Fatalf("the view of the counterexample: %v, %d bytes", err, html.Len())
	}
}

// TestFenceStopsStaleHolder: a holder pauses between its read and its
// write until its lock has expired and a second client has taken the key
// and run its section. With a register that checks fences, the stale write
// is rejected and the history is linearizable (the register counts one
// increment); with one that does not, the same schedule is a lost update.
func TestFenceStopsStaleHolder(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		ctx := ctxT(t)
		store := memlock.NewStore()
		a, b := memlock.New(store), memlock.New(store)
		defer a.Close()
		defer b.Close()
		rec, reg := history.NewRecorder(), history.NewRegister(fenced)
		la, err := a.Acquire(ctx, "k", lockswap.WithTTL(lockswap.MinTTL))
		if err != nil {
			t.Fatal(err)
		}
		op := history.Section(ctx, rec, reg, 0, la, func(ctx context.Context) {
			select {
			case <-la.Done(): // the lock expired while its holder paused
			case <-ctx.Done():
				t.Fatal("the paused holder's lock never expired")
			}
			lb, err := b.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			history.Section(ctx, rec, reg, 1, lb, nil)
			lb.Release(ctx)
		})
		r, err := history.Check(rec.Ops(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !op.Late {
			t.Errorf("the paused holder's section is not marked late")
		}
		switch {
		case fenced && (op.Wrote || !r.Linearizable || reg.Value("k") != 1):
			t.Fatalf("fenced register: stale write accepted %v, result %+v, register %d; want rejected, linearizable, 1", op.Wrote, r, reg.Value("k"))
		case !fenced && (!op.Wrote || r.Linearizable):
			t.Fatalf("register without fences: stale write accepted %v, result %+v; want accepted and a violation", op.Wrote, r)
		}
	}
}

// TestReadJSONLErrors: a line that is not an Op, or one that returns before
// it is called, is an error naming its line.
func TestReadJSONLErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"client":0,"key":"k","token":"t","read":0,"wrote":true,"call_ns":1,"return_ns":2}` + "\nnot json\n", "line 2"},
		{`{"client":0,"key":"k","token":"t","read":0,"wrote":true,"call_ns":5,"return_ns":2}`, "line 1: return_ns 2 is before call_ns 5"},
		{`{"client":0,"key":"k","token":"t","read":0,"wrote":true,"call_ns":1,"return_ns":2,"extra":1}`, `line 1: json: unknown field "extra"`},
		{`{"client":0,"key":"k","token":"t","read":0,"call_ns":1,"return_ns":2}`, `line 1: no "wrote"`},
		{`{"client":0,"key":"","token":"t","read":0,"wrote":true,"call_ns":1,"return_ns":2}`, "line 1: the key is empty"},
	} {
		if _, err := history.ReadJSONL(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadJSONL(%q): %v, want an error with %q", c.in, err, c.want)
		}
	}
}

// TestFenceOrderChecked: sections that follow one another in time with
// fences that go down (each later holder rejected by the register, so the
// count alone looks right), or a fence given to two locks, are reported.
func TestFenceOrderChecked(t *testing.T) {
	reg, rec := history.NewRegister(true), history.NewRecorder()
	var ops []history.Op
	for i, f := range []uint64{10, 3, 3, 1} {
		op := history.Op{Client: i, Key: "k", Token: fmt.Sprint("t", i), Fence: f, Call: rec.Now()}
		if v, ok := reg.Read("k", f); ok {
			op.Read, op.Wrote = v, reg.Write("k", v+1, f)
		}
		op.Return = rec.Now()
		ops = append(ops, op)
	}
	r, err := history.Check(ops, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Linearizable || len(r.Fences) != 4 {
		t.Fatalf("fences 10, 3, 3, 1 in turn: linearizable %v, fence violations %q; want linearizable (3 rejected), 4 violations (3 after 10 twice, 3 twice, 1 after 10)", r.Linearizable, r.Fences)
	}
}

// unavailable is a Locker whose Acquire always fails with ErrUnavailable
// at once, counting its calls.
type unavailable struct {
	*memlock.Locker
	calls atomic.Int64
}

func (u *unavailable) Acquire(context.Context, string, ...lockswap.Option) (lockswap.Lock, error) {
	u.calls.Add(1)
	return nil, lockswap.ErrUnavailable
}

// TestWorkloadBacksOff: a client whose Acquire fails at once pauses
// between attempts (at least half a millisecond, doubling), and Run
// returns the context's error with the failure it was retrying.
func TestWorkloadBacksOff(t *testing.T) {
	u := &unavailable{Locker: memlock.New(memlock.NewStore())}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := history.Workload{Lockers: []lockswap.Locker{u}, Keys: []string{"k"}, Sections: 1,
		Register: history.NewRegister(false), Recorder: history.NewRecorder()}.Run(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("Run against an outage: %v, want the deadline and ErrUnavailable", err)
	}
	if n := u.calls.Load(); n > 201 {
		t.Fatalf("%d attempts in 100 ms: the pauses (0.5 ms at least) allow 201", n)
	}
}
