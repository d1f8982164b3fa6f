// Package attempt bounds the requests of a remote lock by the caller's
// deadline and leaves no lock behind when the caller gives up.
//
// A request already written to the server runs there whether or not the
// client still waits for its reply. If the client returned at the
// cancellation (redigo's DoContext does, and its write may even happen
// after it returned), a request that then takes the lock leaves it held
// until its TTL, as a crashed holder would. A request context from
// [Context] instead lets the attempt finish, for a short grace
// (lockswap.DeadlineGrace) after the caller's context ended, so that the
// kit (package driver) can give back a lock that the caller no longer
// wants. [Release] runs an idempotent release request within the
// caller's deadline and goes on in the background when its outcome is
// still unknown then.
//
// Every request context made here carries a deadline (clients such as
// go-redis obey deadlines, not cancellation): the caller's deadline plus
// the grace, and never more than [Timeout] from now.
package attempt

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/background"
)

// Grace is how long an attempt may still run after its caller's context
// ended: enough for a reply on its way, not enough to hold up a cancelled
// caller noticeably.
const Grace = lockswap.DeadlineGrace

// Timeout bounds one request whatever the caller's context: a server that
// accepts and never answers fails the attempt (as an outage) after Timeout,
// so that a wait with context.Background() still ends (see
// lockswap.DefaultMaxOutage).
const Timeout = lockswap.RequestTimeout

// Limit returns the deadline [Context] would give a request made for ctx
// now, without making a context.
func Limit(ctx context.Context, max time.Duration) time.Time {
	now := time.Now()
	limit := now.Add(max)
	if ctx.Err() != nil {
		if g := now.Add(Grace); g.Before(limit) {
			limit = g
		}
		return limit
	}
	if d, ok := ctx.Deadline(); ok {
		if g := d.Add(Grace); g.Before(limit) {
			limit = g
		}
	}
	return limit
}

// Context returns the context for one request made for ctx: it keeps ctx's
// values, ends Grace after ctx ends (Grace from now if ctx has already
// ended) and at the latest max from now, and carries that bound as its
// deadline. The returned function releases its resources. [New] is the
// same without the function value.
func Context(ctx context.Context, max time.Duration) (context.Context, func()) {
	r := New(ctx, max)
	return r, r.Stop
}

// Request is the context of one request, as [Context] describes it, in one
// value: its deadline is the caller's plus Grace, at most max from [New];
// a cancellation of the caller's context ends it Grace later; [Request.Stop]
// ends it and releases what it holds. A caller whose context nothing can
// cancel (Done returns nil) gets a context that nothing cancels either,
// with the bound as its deadline only: clients read it as the deadline of
// their socket operations, and callers that loop check the time against
// Deadline (see [Ended]). [Until] makes the other kind of Request: the
// context of a call that ends at a deadline of its own or as soon as its
// parent ends.
//
// It costs one allocation ([New]; none with [Once]) until a client asks
// for Done: then it makes its channel and takes a timer from a pool, so
// that a waiter wakes at the end (a request that a Locker's Close ends
// and its caller cannot, [Request.EndAtClose], shares its slot's channel
// and timer instead). It registers with the caller's context
// (context.AfterFunc) only when it is still running [Watch] after a
// client first asked for its Done: a request that ends sooner, nearly all
// of them, costs the caller's context nothing (registering takes the
// caller context's lock, which the goroutines sharing it would contend
// for, and allocates). The timer checks the caller's context at that
// point, so a cancellation in the first [Watch] is seen at most [Watch]
// late, and one after it at once. Clients that only read the deadline
// (rueidis outside auto-pipelining) or only poll Err pay for none of
// that; a cancellation that Err notices before anyone asked for Done
// counts from then.
//
// A Request serves one request and is not reused, so that a client that
// keeps the context after the request (a pool watching it, a goroutine
// reading Err after Done) never sees it come back to life for another one.
// Its methods are safe for concurrent use ([Request.EndAtClose], which
// comes before the others, excepted).
type Request struct {
	mu     sync.Mutex
	parent context.Context // values; its cancellation ends the request grace later
	// grace is how long the request outlives its parent's cancellation:
	// Grace ([New]), or 0 ([Until]: it ends at once, with the parent's
	// Err).
	grace time.Duration
	// deadline is what Deadline reports; end is when the request ends:
	// deadline, or grace after parent's cancellation when that is earlier;
	// endErr is Err from then.
	deadline, end time.Time
	endErr        error
	err           error         // set when the request ended or was stopped
	done          chan struct{} // made by the first Done; closed when err is set
	bound         bool          // parent cannot be cancelled, and neither can the request: no Done, no Err
	cancellable   bool          // parent can be cancelled (its Done is not nil)
	cancelSeen    bool          // parent's cancellation was taken into end
	long          bool          // begun with at least MinShared to its deadline (set by init; false for Until's)
	wake          *wakeup       // the timer and callback; taken by the first Done
	stopParent    func() bool   // undoes context.AfterFunc(parent, wake.fire)
	// closing, when set ([Request.EndAtClose]), ends the request at once
	// (no grace) when it ends: the Locker's Close.
	closing     context.Context
	closingSeen bool        // closing's end was taken into end
	stopClosing func() bool // undoes context.AfterFunc(closing, wake.fire)
	// shared, when set (EndAtClose, for a caller whose context cannot be
	// cancelled), is the request's slot in dl, the Locker's Deadlines: its
	// channel is Done, its end Err. Both are set before the request is
	// handed to a client and never change.
	shared *slot
	dl     *Deadlines
	begun  atomic.Bool // see Once
}

// Watch is how long after a client first asks for a request's Done the
// request, if it is still running, registers with its caller's context
// (see [Request]).
const Watch = 10 * time.Millisecond

// wakeup is a Request's timer and the callback of the timer and of the
// caller context's registration (fire, bound once). Requests share them
// through a pool: Stop gives one back only when neither can run any more
// (the timer stopped before it fired, the registration removed before it
// ran), so a wakeup never calls into another request than its own.
type wakeup struct {
	t    *time.Timer
	r    atomic.Pointer[Request]
	fire func() // w.run
}

func (w *wakeup) run() {
	if r := w.r.Load(); r != nil {
		r.check()
	}
}

var wakeups = sync.Pool{New: func() any {
	w := new(wakeup)
	w.fire = w.run
	return w
}}

// closedChan is the Done of a request that ended before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// New returns the context of one request made for ctx (see [Context]); its
// Stop method releases its resources.
func New(ctx context.Context, max time.Duration) *Request {
	r := new(Request)
	r.init(ctx, time.Now(), max)
	return r
}

// Until returns the context of one call made for parent: it keeps
// parent's values, ends at deadline (or at parent's, when that is
// earlier) with context.DeadlineExceeded, and as soon as parent ends with
// parent's Err (as context.WithDeadline would; a waiter on Done learns of
// it within [Watch], see [Request]). Unlike [New]'s, its Done is never
// nil. Its Stop method ends it and releases its resources.
func Until(parent context.Context, deadline time.Time) *Request {
	r := new(Request)
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	r.parent, r.deadline, r.end = parent, deadline, deadline
	r.endErr = context.DeadlineExceeded
	if p, ok := parent.(*Request); ok {
		// Asking a Request for Done would arm its timer for nothing.
		r.cancellable = !p.bound
	} else {
		r.cancellable = parent.Done() != nil
	}
	if r.cancellable && parent.Err() != nil {
		r.cancelSeen = true
		r.end, r.endErr = time.Now(), parent.Err()
	}
	r.begun.Store(true)
	return r
}

// Once returns r, a Request that the caller keeps in a value it allocates
// anyway (a lock), begun for ctx as [New] would, when r has not been begun
// before; otherwise it returns a new Request. It spares the allocation of
// the one request such a value usually makes, and a Request still serves
// one request only.
func Once(r *Request, ctx context.Context, max time.Duration) *Request {
	return OnceAt(r, ctx, time.Now(), max)
}

// OnceAt is [Once] for a caller that has just read the clock: now, a
// reading of time.Now (with its monotonic clock) taken before the call,
// stands for "now", so the request's bound is max from now. A caller that
// times the request from the same reading spares one: time.Now reads the
// wall and monotonic clocks, about 50 ns on the 2-core test machine (a
// system call on a virtual machine without a usable TSC), several times
// per lock.
func OnceAt(r *Request, ctx context.Context, now time.Time, max time.Duration) *Request {
	if !r.begun.CompareAndSwap(false, true) {
		r = new(Request)
	}
	r.init(ctx, now, max)
	return r
}

func (r *Request) init(ctx context.Context, now time.Time, max time.Duration) {
	limit := now.Add(max)
	ended := ctx.Err() != nil
	if ended {
		if g := now.Add(Grace); g.Before(limit) {
			limit = g
		}
	} else if d, ok := ctx.Deadline(); ok {
		if g := d.Add(Grace); g.Before(limit) {
			limit = g
		}
	}
	r.parent, r.grace, r.deadline, r.end = ctx, Grace, limit, limit
	r.endErr = context.DeadlineExceeded
	r.cancellable = ended || ctx.Done() != nil
	r.bound, r.cancelSeen = !r.cancellable, ended
	r.long = limit.Sub(now) >= MinShared
}

// EndAtClose makes r, a Request of [New] or [Once] not yet handed to a
// client (nor to anything that may call its methods meanwhile: unlike
// them, EndAtClose is not safe for concurrent use), also end at once,
// with context.Canceled and without the grace, when the closing context
// of d ends: the kit passes its Locker's
// Deadlines, whose context its Close cancels, so that a request in
// flight at Close returns then (from a client that watches Done) instead
// of at its deadline. It returns r.
//
// When the caller's context cannot be cancelled and r was begun with at
// least [MinShared] to its deadline, r's Done is the channel of its
// deadline's slot in d, shared with the Locker's other requests that end within the same
// [Slot]: no channel and no timer of r's own. It closes up to Slot before
// r's Deadline (never after, as far as timers run on time) or at Close,
// and Err is DeadlineExceeded or Canceled from then. Stop does not end
// such a request as a context: a client or a context derived from it
// that is still running then ends at its slot or at Close (no later than
// r's deadline), as the shared channel cannot be closed for one request.
func (r *Request) EndAtClose(d *Deadlines) *Request {
	// r is not shared yet: no lock. Whether r has MinShared left counts
	// from its start (init), which spares a reading of the clock.
	r.closing, r.bound = d.closing, false
	r.noteCancel()
	if !r.cancellable && !r.closingSeen && r.long {
		r.dl, r.shared = d, d.slotOf(r.end)
	}
	return r
}

// Stop ends the request and releases what it holds: its registration
// with the caller's context, its timer, and the caller's context itself. A client still waiting on Done
// sees it closed, with Err context.Canceled, as after a CancelFunc;
// except for a request that shares its slot's channel
// ([Request.EndAtClose]), which ends as a context at its slot or at Close.
func (r *Request) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	idle := true
	if r.stopParent != nil {
		idle = r.stopParent()
		r.stopParent = nil
	}
	if r.stopClosing != nil {
		idle = r.stopClosing() && idle
		r.stopClosing = nil
	}
	if w := r.wake; w != nil {
		r.wake = nil
		if w.t.Stop() && idle {
			w.r.Store(nil)
			wakeups.Put(w)
		}
	}
	if r.err == nil {
		r.finish(context.Canceled)
	}
	// Let the caller's context go: r may live on in the value that
	// holds it.
	r.parent, r.closing = nil, nil
}

// check is the callback of the timer and of the caller context's
// registration: it takes a cancellation into the end, ends the request
// when its end has come, registers with the caller's context once the
// request has run [Watch], and sets the timer for the end (a late run
// changes nothing that is not due).
func (r *Request) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	left, ended := r.catchUp()
	if ended {
		return
	}
	if r.watching() {
		r.stopParent = context.AfterFunc(r.parent, r.wake.fire)
	}
	if r.watchingClose() {
		r.stopClosing = context.AfterFunc(r.closing, r.wake.fire)
	}
	r.arm(left)
}

// watching reports whether the request must still register with the
// caller's context to learn of its cancellation. r.mu is held.
func (r *Request) watching() bool {
	return r.cancellable && !r.cancelSeen && r.stopParent == nil
}

// watchingClose is watching for the closing context. r.mu is held.
func (r *Request) watchingClose() bool {
	return r.closing != nil && !r.closingSeen && r.stopClosing == nil
}

// catchUp takes a cancellation of the caller's context into the end and
// ends the request when its end has come; it reports whether the request
// has ended, and otherwise the time left to its end. r.mu is held and
// r.err is nil. It reads the monotonic clock only (time.Until), not the
// wall clock as well, when nothing was cancelled.
func (r *Request) catchUp() (left time.Duration, ended bool) {
	r.noteCancel()
	if left = time.Until(r.end); left <= 0 {
		r.finish(r.endErr)
		return 0, true
	}
	return left, false
}

// noteCancel takes a cancellation of the caller's context, if any, into
// the end: grace from now (Canceled), or now with the caller context's
// Err for a request of [Until]. r.mu is held, or r is not shared yet
// (EndAtClose).
func (r *Request) noteCancel() {
	if r.closing != nil && !r.closingSeen && r.closing.Err() != nil {
		r.closingSeen = true
		if now := time.Now(); now.Before(r.end) {
			r.end, r.endErr = now, context.Canceled
		}
	}
	if r.cancelSeen || !r.cancellable {
		return
	}
	err := r.parent.Err()
	if err == nil {
		return
	}
	now := time.Now()
	r.cancelSeen = true
	switch g := now.Add(r.grace); {
	case r.grace == 0:
		r.end, r.endErr = now, err
	case g.Before(r.end):
		r.end, r.endErr = g, context.Canceled
	}
}

// arm sets the timer to run check after d. r.mu is held.
func (r *Request) arm(d time.Duration) {
	if r.wake.t == nil {
		r.wake.t = time.AfterFunc(d, r.wake.fire)
		return
	}
	r.wake.t.Reset(d)
}

// finish ends the request with err. r.mu is held.
func (r *Request) finish(err error) {
	r.err = err
	if r.done != nil {
		close(r.done)
	}
}

// Deadline is the request's bound.
func (r *Request) Deadline() (time.Time, bool) { return r.deadline, true }

// Done is closed when the request ends; nil when the caller's context
// cannot be cancelled (for a request of [New] that [Request.EndAtClose]
// did not make the Locker's Close end).
func (r *Request) Done() <-chan struct{} {
	if r.shared != nil {
		return r.shared.ch
	}
	if r.bound {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return r.done
	}
	if r.err != nil {
		return closedChan
	}
	d, ended := r.catchUp()
	if ended {
		return closedChan
	}
	r.done = make(chan struct{})
	r.wake = wakeups.Get().(*wakeup)
	r.wake.r.Store(r)
	if r.watching() || r.watchingClose() {
		// Look at the caller's context (and the closing one) again in
		// Watch, and register with it then if the request is still
		// running.
		d = min(d, Watch)
	}
	r.arm(d)
	return r.done
}

// Err is context.DeadlineExceeded once the deadline has passed,
// context.Canceled once the grace after the caller's cancellation has run
// out or Stop was called (a request of [Until]: the caller context's Err
// as soon as it ends), nil before (and always nil when the caller's
// context cannot be cancelled, for a request of [New]). A request whose
// Done is its slot's channel ([Request.EndAtClose]) is the exception: its
// Err is nil while the slot is open, Stop or not, and then why the slot
// closed, context.DeadlineExceeded up to [Slot] before the deadline or
// context.Canceled at the Locker's Close. Once someone has
// asked for Done, Err is what closed Done, as for the standard library's
// contexts (the timer ends the request); before, Err looks at the clock
// and the caller's context itself, for clients that only poll it.
func (r *Request) Err() error {
	if r.shared != nil {
		return r.sharedErr()
	}
	if r.bound {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil && r.done == nil {
		r.catchUp()
	}
	return r.err
}

// sharedErr is Err for a request whose Done is its slot's channel
// (EndAtClose): nil while the channel is open, and from its closing on
// why it was closed, context.DeadlineExceeded (the slot's start) or
// context.Canceled (the Locker's Close; a Close that has begun closes the
// slots here, not waiting for its registration with the closing
// context to run).
func (r *Request) sharedErr() error {
	if r.dl.closing.Err() != nil {
		r.dl.closeAll()
	}
	return r.shared.ended()
}

// Value is the caller's context's value for key.
// After Stop it has no values.
func (r *Request) Value(key any) any {
	r.mu.Lock()
	p := r.parent
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Value(key)
}

// String names the context, for debugging.
func (r *Request) String() string { return "attempt.Request" }

// Ended reports whether rctx, a context from [Context], has ended: its
// deadline has passed or it was cancelled.
func Ended(rctx context.Context) bool {
	if rctx.Err() != nil {
		return true
	}
	d, ok := rctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Release goes on with a release whose first request (made by the caller,
// under a context from [Context] started at start, whose deadline was
// limit) failed with an unknown outcome: retry reports true for its error
// err. It calls op, the same idempotent request, again until it gives an
// answer that retrying cannot change, within limit (and within Grace of
// ctx's end when ctx is cancelled meanwhile). When the outcome is still
// unknown then, it goes on in the background in g, up to
// lockswap.CleanupTimeout from start, calling then(v, err) with its final
// answer, and Release returns the last error with pending true. Otherwise
// it returns op's answer and pending false (then is not called).
//
// The first request stays with the caller so that a release that succeeds
// at once (nearly all of them) costs no closure and no goroutine.
func Release[T any](ctx context.Context, g *background.Group, start, limit time.Time, v T, err error, op func(context.Context) (T, error), retry func(error) bool, then func(T, error)) (T, error, bool) {
	pause := 5 * time.Millisecond
	for err != nil && retry(err) {
		if ctx.Err() != nil {
			if g := time.Now().Add(Grace); g.Before(limit) {
				limit = g
			}
		}
		wait := min(pause, time.Until(limit))
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		<-t.C
		if pause < 100*time.Millisecond {
			pause *= 2
		}
		if !time.Now().Before(limit) {
			break
		}
		// A request of the caller's (New), not one detached from ctx: a
		// cancellation while it hangs ends it Grace later, not at limit.
		rctx := New(ctx, time.Until(limit))
		v, err = op(rctx)
		rctx.Stop()
	}
	if err == nil || !retry(err) {
		return v, err, false
	}
	left := lockswap.CleanupTimeout - time.Since(start)
	if left <= 0 || g == nil {
		return v, err, false
	}
	started := g.Go(ctx, func(bctx context.Context) {
		bctx, cancel := context.WithTimeout(bctx, left)
		defer cancel()
		var (
			bv   T
			berr error
		)
		background.Retry(bctx, func(sctx context.Context) bool {
			bv, berr = op(sctx)
			return berr == nil || !retry(berr)
		})
		if then != nil {
			then(bv, berr)
		}
	})
	return v, err, started
}
