package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// MatrixEnv is the environment variable that selects the size of
// [RunMatrix]: "full" runs every cell on every client, with the default
// bounds for contexts without a deadline (DefaultMaxOutage for Acquire
// and Do: each such cell waits up to 15 s, so the full matrix takes tens
// of minutes, see docs/errors.md); anything else runs the CI size.
const MatrixEnv = "LOCKSWAP_MATRIX"

// MatrixFull reports whether [MatrixEnv] asks for the full matrix.
func MatrixFull() bool { return os.Getenv(MatrixEnv) == "full" }

// Matrix is a backend's promise matrix: its faults on each client library
// it runs with.
type Matrix struct {
	// TTL is the lock TTL of the cells.
	TTL time.Duration
	// Clients are the client libraries, each with the backend's faults
	// over it; every client lists the same faults in the same order. A
	// backend with one client gives one, with any name.
	Clients []MatrixClient
	// Overruns, when not nil, records the time each cell took past its
	// bound (negative: it returned before).
	Overruns *Overruns
}

// MatrixClient is one client library and the faults over it.
type MatrixClient struct {
	Name   string
	Faults []Fault
}

// ctxKind is how a call's context ends: the columns of the matrix.
type ctxKind int

const (
	ctxDeadline   ctxKind = iota // a deadline 200 ms away
	ctxCancel                    // no deadline, cancelled after 100 ms
	ctxDone                      // already cancelled when the call starts
	ctxBackground                // context.Background(): the default bounds
)

var ctxKinds = []ctxKind{ctxDeadline, ctxCancel, ctxDone, ctxBackground}

func (k ctxKind) String() string {
	return [...]string{"deadline", "cancel", "done", "background"}[k]
}

const (
	// matrixDeadline is the deadline of the ctxDeadline cells.
	matrixDeadline = 200 * time.Millisecond
	// matrixCancel is when the ctxCancel cells cancel.
	matrixCancel = 100 * time.Millisecond
	// ciOutage is the outage bound of Acquire and Do without a deadline at
	// the CI size: shorter than lockswap.RequestTimeout, so that a first
	// attempt left to its request timeout shows.
	ciOutage = time.Second
	// closeBound is how long Close may take, whatever the servers do.
	closeBound = time.Second
	// waiterBound is how soon after Close a waiting Acquire ends.
	waiterBound = 100 * time.Millisecond
)

// newCtx returns the context of a cell of kind k, and the bound the call
// must keep counted from now, when it is the context's (for
// ctxBackground: 0, the caller knows its call's default bound).
func (k ctxKind) newCtx(t *testing.T) (context.Context, time.Duration) {
	switch k {
	case ctxDeadline:
		ctx, cancel := context.WithTimeout(context.Background(), matrixDeadline)
		t.Cleanup(cancel)
		return ctx, matrixDeadline
	case ctxCancel:
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(matrixCancel, cancel)
		t.Cleanup(func() { timer.Stop(); cancel() })
		return ctx, matrixCancel
	case ctxDone:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, 0
	}
	return context.Background(), 0
}

// sentinels are the errors every error of a backend matches one of.
var sentinels = []error{lockswap.ErrHeld, lockswap.ErrUnavailable, lockswap.ErrLost, lockswap.ErrInvalid, lockswap.ErrClosed}

// sentinelNames are their names, for messages.
var sentinelNames = map[error]string{
	lockswap.ErrHeld: "ErrHeld", lockswap.ErrUnavailable: "ErrUnavailable", lockswap.ErrLost: "ErrLost",
	lockswap.ErrInvalid: "ErrInvalid", lockswap.ErrClosed: "ErrClosed",
}

// classOf names the sentinels err matches ("none" for none).
func classOf(err error) (matched []error, names string) {
	var n []string
	for _, s := range sentinels {
		if errors.Is(err, s) {
			matched = append(matched, s)
			n = append(n, sentinelNames[s])
		}
	}
	if len(n) == 0 {
		return nil, "none"
	}
	return matched, strings.Join(n, "+")
}

// checkClass fails the cell unless err matches exactly the sentinel want
// (the context's error may come alongside), and, with ctxErr, unless it
// matches the ended context's error too.
func checkClass(t *testing.T, what string, err, want error, ctx context.Context, ctxErr bool) {
	t.Helper()
	matched, names := classOf(err)
	if len(matched) != 1 || matched[0] != want {
		t.Errorf("%s: err = %v (matches %s); want exactly %s, the context's error alongside it or not", what, err, names, sentinelNames[want])
	}
	if ctxErr && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		t.Errorf("%s: err = %v; want it to match the context's error (%v) too: the wait ended with the context", what, err, ctx.Err())
	}
}

// RunMatrix runs the promise matrix: every public call (Open when a fault
// has one, TryAcquire, Acquire, Extend, Release, Do, Close, and an
// Acquire waiting when Close is called) under every fault, with every
// kind of context (a deadline, a cancel without a deadline, one already
// done, context.Background() with the default bounds), checking each
// cell against the bound docs/errors.md states, plus the scheduling lag a
// [LagProbe] measured meanwhile, and the class of its error: it matches
// exactly one sentinel (lockswap.ErrUnavailable under a fault unless the
// fault's Want says otherwise; ErrClosed for the waiter at Close), the
// context's error alongside it or not, and for Acquire and Do, whose wait
// ended with the context, the context's error too.
//
// At the CI size each cell runs on one client, in turn, so that every
// client meets every fault and every context kind, and the calls that
// default to lockswap.RequestTimeout without a deadline (Open,
// TryAcquire, Extend, Release: 5 s each) are left to the full size; Acquire
// and Do without a deadline run with an outage bound of 1 s. With
// [MatrixEnv]=full every cell runs on every client, Acquire and Do with
// lockswap.DefaultMaxOutage.
func RunMatrix(t *testing.T, m Matrix) {
	t.Helper()
	if len(m.Clients) == 0 {
		t.Fatal("conformance.RunMatrix: no clients")
	}
	full := MatrixFull()
	// clientsFor is the clients of a cell: at the CI size one, in turn
	// over the cells (numbered the same whatever -run selects).
	clientsFor := func(fi, ci int, k ctxKind) []MatrixClient {
		if full || len(m.Clients) == 1 {
			return m.Clients
		}
		// fault + call + kind: for one fault and kind, the calls go
		// round every client.
		i := (fi + ci + int(k)) % len(m.Clients)
		return m.Clients[i : i+1]
	}
	for fi, f := range m.Clients[0].Faults {
		t.Run(f.Name, func(t *testing.T) {
			// Faults in parallel (up to go test's -parallel): each cell
			// has servers of its own, and most of a cell is waiting.
			t.Parallel()
			mc := &matrixCell{ttl: m.TTL, o: m.Overruns, full: full}
			// The rows of a fault side by side too, whatever -parallel
			// says (t.Run from goroutines of their own): a cell spends
			// most of its time waiting for its bound, and its bound is
			// checked against the scheduling lag measured meanwhile.
			var rows sync.WaitGroup
			defer rows.Wait()
			for ci, call := range matrixCalls {
				rows.Go(func() {
					t.Run(call.name, func(t *testing.T) {
						for _, k := range ctxKinds {
							if !call.runs(k, full) {
								continue
							}
							for _, c := range clientsFor(fi, ci, k) {
								name := k.String()
								if len(m.Clients) > 1 {
									name += "/" + c.Name
								}
								t.Run(name, func(t *testing.T) { call.run(mc, t, c.Faults[fi], k) })
							}
						}
					})
				})
			}
		})
	}
}

// matrixCell is what every cell of one fault shares.
type matrixCell struct {
	ttl  time.Duration
	o    *Overruns
	full bool
}

// matrixCall is a row of the matrix: one public call.
type matrixCall struct {
	name string
	// kinds are the context kinds it runs with at the CI size; full adds
	// fullKinds.
	kinds, fullKinds []ctxKind
	run              func(mc *matrixCell, t *testing.T, f Fault, k ctxKind)
}

func (c matrixCall) runs(k ctxKind, full bool) bool {
	for _, x := range c.kinds {
		if x == k {
			return true
		}
	}
	if full {
		for _, x := range c.fullKinds {
			if x == k {
				return true
			}
		}
	}
	return false
}

var (
	timed = []ctxKind{ctxDeadline, ctxCancel, ctxDone}
	bg    = []ctxKind{ctxBackground}
)

var matrixCalls = []matrixCall{
	{name: "Open", kinds: timed, fullKinds: bg, run: (*matrixCell).open},
	{name: "TryAcquire", kinds: timed, fullKinds: bg, run: (*matrixCell).tryAcquire},
	{name: "Acquire", kinds: ctxKinds, run: (*matrixCell).acquire},
	{name: "Extend", kinds: timed, fullKinds: bg, run: (*matrixCell).extend},
	{name: "Release", kinds: timed, fullKinds: bg, run: (*matrixCell).release},
	{name: "Do", kinds: ctxKinds, run: (*matrixCell).do},
	{name: "Close", kinds: bg, run: (*matrixCell).close},
	{name: "WaiterAtClose", kinds: []ctxKind{ctxDeadline, ctxBackground}, fullKinds: []ctxKind{ctxCancel}, run: (*matrixCell).waiterAtClose},
}

func want(f Fault) error {
	if f.Want != nil {
		return f.Want
	}
	return lockswap.ErrUnavailable
}

// within runs call and fails the cell if it took longer than bound plus
// the allowance of the scheduling lag measured meanwhile.
func (mc *matrixCell) within(t *testing.T, what string, bound time.Duration, call func()) {
	t.Helper()
	probe := StartLagProbe()
	begin := time.Now()
	call()
	took := time.Since(begin)
	probe.Stop()
	mc.o.add(t.Name(), took-bound)
	if allowed := bound + probe.Allowance(); took > allowed {
		t.Errorf("%s took %v, want at most %v (allowed %v, with scheduling lags up to %v measured meanwhile)",
			what, took.Round(time.Millisecond), bound, allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond))
	}
}

// newLocker makes the fault's Locker, closed when the cell ends, before
// its servers stop. start is nil when the fault is on from the start.
func (mc *matrixCell) newLocker(t *testing.T, f Fault) (lockswap.Locker, func()) {
	lk, start := f.NewLocker(t)
	t.Cleanup(func() { lk.Close() })
	return lk, start
}

// faulty returns a Locker with the fault on.
func (mc *matrixCell) faulty(t *testing.T, f Fault) lockswap.Locker {
	lk, start := mc.newLocker(t, f)
	if start != nil {
		start()
	}
	return lk
}

// held returns a Locker holding a lock taken before the fault, and what
// starts the fault; the cell is skipped for a fault that is on from the
// start.
func (mc *matrixCell) held(t *testing.T, f Fault, opts ...lockswap.Option) (lockswap.Locker, lockswap.Lock, string, func()) {
	t.Helper()
	if f.FromStart {
		t.Skipf("%s is on from the start: no lock can be taken before it", f.Name)
	}
	lk, start := mc.newLocker(t, f)
	if start == nil {
		t.Skipf("%s is on from the start: no lock can be taken before it", f.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := matrixKey(t)
	// Acquire, not TryAcquire: on a busy machine one attempt on healthy
	// servers may still be too slow (ErrUnavailable); Acquire tries again.
	l, err := lk.Acquire(ctx, key, append([]lockswap.Option{lockswap.WithTTL(mc.ttl)}, opts...)...)
	if err != nil {
		t.Fatalf("Acquire before the fault: %v", err)
	}
	return lk, l, key, start
}

func matrixKey(t *testing.T) string {
	return fmt.Sprintf("matrix-%s-%d", strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()), time.Now().UnixNano())
}

func (mc *matrixCell) bound(k ctxKind, ctxBound, background time.Duration) time.Duration {
	if k == ctxBackground {
		return background
	}
	return ctxBound
}

// outage is the outage bound of Acquire and Do without a deadline.
func (mc *matrixCell) outage() (time.Duration, []lockswap.Option) {
	if mc.full {
		return lockswap.DefaultMaxOutage, nil
	}
	return ciOutage, []lockswap.Option{lockswap.WithMaxOutage(ciOutage)}
}

// open: Open with the fault on returns within its bound; an error it
// returns matches exactly one sentinel. (Opening may succeed: clients
// that connect lazily meet the fault at the first call.)
func (mc *matrixCell) open(t *testing.T, f Fault, k ctxKind) {
	if f.Open == nil {
		t.Skipf("%s has no Open", f.Name)
	}
	ctx, b := k.newCtx(t)
	var (
		lk  lockswap.Locker
		err error
	)
	mc.within(t, "Open", mc.bound(k, b, lockswap.RequestTimeout), func() { lk, err = f.Open(t, ctx) })
	if lk != nil {
		t.Cleanup(func() { lk.Close() })
	}
	if err != nil {
		if matched, names := classOf(err); len(matched) != 1 {
			t.Errorf("Open: err = %v (matches %s); want exactly one sentinel", err, names)
		}
	}
}

func (mc *matrixCell) tryAcquire(t *testing.T, f Fault, k ctxKind) {
	lk := mc.faulty(t, f)
	ctx, b := k.newCtx(t)
	var (
		l   lockswap.Lock
		err error
	)
	mc.within(t, "TryAcquire", mc.bound(k, b, lockswap.RequestTimeout), func() {
		l, err = lk.TryAcquire(ctx, matrixKey(t), lockswap.WithTTL(mc.ttl))
	})
	if l != nil {
		t.Errorf("TryAcquire under %s returned a lock", f.Name)
	}
	checkClass(t, "TryAcquire", err, want(f), ctx, false)
}

func (mc *matrixCell) acquire(t *testing.T, f Fault, k ctxKind) {
	lk := mc.faulty(t, f)
	ctx, b := k.newCtx(t)
	outage, opts := mc.outage()
	var (
		l   lockswap.Lock
		err error
	)
	mc.within(t, "Acquire", mc.bound(k, b, outage), func() {
		l, err = lk.Acquire(ctx, matrixKey(t), append(opts, lockswap.WithTTL(mc.ttl))...)
	})
	if l != nil {
		t.Errorf("Acquire under %s returned a lock", f.Name)
	}
	checkClass(t, "Acquire", err, want(f), ctx, true)
}

func (mc *matrixCell) extend(t *testing.T, f Fault, k ctxKind) {
	_, l, _, start := mc.held(t, f)
	start()
	ctx, b := k.newCtx(t)
	var err error
	mc.within(t, "Extend", mc.bound(k, b, lockswap.RequestTimeout), func() { err = l.Extend(ctx, mc.ttl) })
	// The outcome is unknown: not ErrLost, which would tell the holder
	// that the lock is gone when it may still hold it.
	checkClass(t, "Extend", err, want(f), ctx, false)
}

func (mc *matrixCell) release(t *testing.T, f Fault, k ctxKind) {
	_, l, _, start := mc.held(t, f)
	start()
	ctx, b := k.newCtx(t)
	var err error
	mc.within(t, "Release", mc.bound(k, b, lockswap.CleanupTimeout), func() { err = l.Release(ctx) })
	// The outcome is unknown: an error, so the caller knows the lock may
	// stay until its TTL.
	checkClass(t, "Release", err, want(f), ctx, false)
}

func (mc *matrixCell) do(t *testing.T, f Fault, k ctxKind) {
	lk := mc.faulty(t, f)
	ctx, b := k.newCtx(t)
	outage, opts := mc.outage()
	ran := false
	var err error
	mc.within(t, "Do", mc.bound(k, b, outage), func() {
		err = lockswap.Do(ctx, lk, matrixKey(t), func(context.Context, lockswap.Lock) error {
			ran = true
			return nil
		}, append(opts, lockswap.WithTTL(mc.ttl))...)
	})
	if ran {
		t.Errorf("Do under %s ran the function", f.Name)
	}
	checkClass(t, "Do", err, want(f), ctx, true)
}

// close: Close returns within a second (or the fault's CloseBound) while
// a release whose outcome is unknown goes on in the background.
func (mc *matrixCell) close(t *testing.T, f Fault, _ ctxKind) {
	lk, l, _, start := mc.held(t, f)
	start()
	ctx, cancel := context.WithTimeout(context.Background(), matrixDeadline)
	defer cancel()
	l.Release(ctx)
	probe := StartLagProbe()
	begin := time.Now()
	lk.Close()
	took := time.Since(begin)
	probe.Stop()
	bound := closeBound
	if f.CloseBound > 0 {
		bound = f.CloseBound
	}
	mc.o.add(t.Name(), took-bound)
	if allowed := bound + probe.Extra(); took > allowed {
		t.Errorf("Close under %s took %v, want at most %v (allowed %v with scheduling lags up to %v measured meanwhile)",
			f.Name, took.Round(time.Millisecond), bound, allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond))
	}
}

// waiterAtClose: an Acquire waiting on a held key when the servers fail
// and Close is called ends with ErrClosed within 100 ms of the Close.
func (mc *matrixCell) waiterAtClose(t *testing.T, f Fault, k ctxKind) {
	lk, _, key, start := mc.held(t, f, lockswap.WithTTL(30*time.Second))
	var ctx context.Context
	switch k {
	case ctxDeadline: // far enough away not to be what ends the wait
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		ctx = c
	case ctxCancel: // cancelled only at the end of the cell
		c, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		ctx = c
	default:
		ctx = context.Background()
	}
	// One waiter at a time in the process: the faults (and a backend's
	// variants) run in parallel, and blockedIn sees every goroutine.
	waiterAtCloseMu.Lock()
	defer waiterAtCloseMu.Unlock()
	errc := make(chan error, 1)
	go waitAtClose(ctx, lk, key, errc)
	eventually(t, blockedWithin, "the Acquire waiting", func() bool {
		return blockedIn(".Acquire(", "conformance.waitAtClose") >= 1
	})
	start()
	probe := StartLagProbe()
	defer probe.Stop()
	begin := time.Now()
	closed := make(chan struct{})
	go func() { lk.Close(); close(closed) }()
	t.Cleanup(func() { <-closed })
	select {
	case err := <-errc:
		took := time.Since(begin)
		mc.o.add(t.Name(), took-waiterBound)
		if allowed := waiterBound + probe.Allowance(); took > allowed {
			t.Errorf("the waiting Acquire ended %v after Close under %s, want within %v (allowed %v, with scheduling lags up to %v measured meanwhile)",
				took.Round(time.Millisecond), f.Name, waiterBound, allowed.Round(time.Millisecond), probe.Max().Round(time.Millisecond))
		}
		checkClass(t, "the waiting Acquire", err, lockswap.ErrClosed, ctx, false)
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiting Acquire had not ended 10 s after Close under %s", f.Name)
	}
}

// waiterAtCloseMu makes the waiterAtClose cells of the process wait one
// at a time, so that the waiter blockedIn finds is the cell's own.
var waiterAtCloseMu sync.Mutex

// waitAtClose is the waiter of waiterAtClose, a function of its own so
// that its goroutine can be told blocked (blockedIn).
func waitAtClose(ctx context.Context, lk lockswap.Locker, key string, errc chan<- error) {
	l, err := lk.Acquire(ctx, key, lockswap.WithTTL(30*time.Second))
	if l != nil {
		l.Release(context.Background())
		err = fmt.Errorf("the waiter got the lock: %w", lockswap.ErrInvalid)
	}
	errc <- err
}
