package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redisscript"
)

// writeBack is the second round of a fenced acquisition (Options.Fence),
// after a majority granted l in c's round (started at start): the fence is
// v = max(the counters of the grant replies received) + 1, written with
// fenceWriteBack (a compare-and-set: applied only where the counter is
// below v) to the instances that granted l. The lock is l with fence v when
// a majority of all the instances applied it and validity remains, counted
// from start with the write-back's time in it. Otherwise the acquisition
// is undone as a partial quorum is (ok and unknown: see settle), and the
// attempt fails: ErrHeld when instances refused v (a later acquirer's
// fence got there first: contention), ErrInvalid when counters that cannot
// give a fence leave no possible majority, ErrUnavailable when the answers
// missing or the time taken decide it.
func (p *proto) writeBack(ctx context.Context, l *rlock, c *call, ok, unknown uint64, start time.Time, ttl time.Duration) (driver.Grant, error) {
	var granted uint64
	var top int64 = -1
	for i := range c.res {
		if r := &c.res[i]; r.err == nil && r.n == 1 {
			granted |= 1 << i
			top = max(top, r.fence)
		}
	}
	v := top + 1
	w := p.fan.get()
	args := [2]any{v, counterTTLArg()}
	w.op, w.keys, w.key, w.args, w.mask = opFence, l.fkeys[:], l.fkey, args[:], granted
	end := start.Add(ttl - p.drift(ttl)) // no use writing past the validity
	p.fan.run(ctx, w, earliest(p.writeBackDue(start, ttl), end))
	var applied, refused, perm, failed int
	var errs []string
	for i := range w.res {
		if granted&(1<<i) == 0 {
			continue
		}
		r := &w.res[i]
		switch {
		case r.err != nil:
			if isPermanent(r.err) {
				perm++
			} else {
				failed++
			}
			errs = append(errs, fmt.Sprintf("%s: %v", p.inst[i].c, r.err))
		case r.n == 1:
			applied++
		default:
			refused++
		}
	}
	var permErrs []error
	if perm > 0 {
		permErrs = make([]error, len(w.res))
		for i := range w.res {
			if err := w.res[i].err; err != nil && isPermanent(err) {
				permErrs[i] = err
			}
		}
	}
	p.fan.put(w)
	elapsed := time.Since(start)
	validity := ttl - elapsed - p.drift(ttl)
	if applied >= p.quorum && validity > 0 {
		l.acquired, l.unknown, l.deadline = start, unknown, start.Add(validity)
		p.hints.saw(l.keys[0], v, l.guess, l.clockGuess)
		return driver.Grant{Deadline: l.deadline, Fence: uint64(v)}, nil
	}
	p.undo(ctx, l, ok, unknown, ttl)
	n := len(p.inst)
	detail := ""
	if len(errs) > 0 {
		detail = ": " + strings.Join(errs, "; ")
	}
	switch {
	case applied >= p.quorum:
		return driver.Grant{}, fmt.Errorf("a majority said OK and took fence %d but it took %v, leaving no validity of the %v TTL (drift %v): %w",
			v, elapsed.Round(time.Microsecond), ttl, p.drift(ttl), lockswap.ErrUnavailable)
	case perm > n-p.quorum:
		return driver.Grant{}, p.invalid(perm, func(i int) error { return permErrs[i] })
	case refused > 0 && applied+failed < p.quorum:
		return driver.Grant{}, fmt.Errorf("fence %d applied on %d of %d instances, refused by %d whose counter was above it: raised by a later acquirer, or lost and seeded again from the clock since the acquire round (need %d)%s: %w",
			v, applied, n, refused, p.quorum, detail, lockswap.ErrHeld)
	default:
		return driver.Grant{}, &outageError{msg: fmt.Sprintf("fence %d applied on %d of %d instances, refused by %d, %d did not answer (need %d)%s",
			v, applied, n, refused, failed, p.quorum, detail)}
	}
}

// parseCounter reads the counter value c of a fenced acquire's grant reply.
func parseCounter(x any) (int64, bool) {
	c, isInt := x.(int64)
	return c, isInt && c >= 0 && c < redisscript.FenceLimit-1
}

// counterError is the error of an instance whose fenced script answered
// code (a redisscript.Fence* code) for the counter key: it cannot give a
// fence, and the script wrote nothing. Retrying cannot fix it.
func counterError(key string, code int64) error {
	return &notLockError{
		msg: fmt.Sprintf("the fence counter %s %s; nothing was written",
			lockstate.QuoteKey(key), redisscript.FenceCounterProblem(code)),
		reason: "a fence counter holds what is not a fence: fix or delete it on that instance (a missing counter is seeded again from the server's clock, which must then be past every fence issued for the key)",
	}
}

// fencedReply records instance i's reply to the fenced acquire: {1,
// counter, applied} (set; applied is 1 when the counter took the guessed
// fence), 0 (held), fenceKeyNotLock or a Fence* code (nothing written).
func (c *call) fencedReply(i int, v any) {
	r := &c.res[i]
	switch x := v.(type) {
	case int64:
		switch {
		case x == 0:
		case x == fenceKeyNotLock:
			r.err = errKeyNotLock
		default:
			r.err = counterError(c.keys[len(c.keys)-1], x)
		}
	case []any:
		if len(x) == 3 {
			if set, _ := x[0].(int64); set == 1 {
				r.n = 1
				var ok bool
				if r.fence, ok = parseCounter(x[1]); ok {
					r.applied = isOne(x[2])
					return
				}
			}
		}
		r.err = fmt.Errorf("unexpected fenced acquire reply %v", v)
	default:
		r.err = fmt.Errorf("unexpected fenced acquire reply %T", v)
	}
}

// fencedSafeReply records instance i's reply to the fenced restart-safe
// acquire: safeAcquire's replies with the counter and whether it took the
// guessed fence added where it set the key, or a Fence* code (nothing
// written).
func (c *call) fencedSafeReply(i int, v any) {
	r := &c.res[i]
	switch x := v.(type) {
	case int64:
		if x < 0 {
			r.err = counterError(c.keys[len(c.keys)-1], x)
			return
		}
	case []any:
		var set int64
		if len(x) > 0 {
			set, _ = x[0].(int64)
		}
		switch {
		case set == 1 && len(x) == 3, set == 1 && len(x) == 6:
			fence, ok := parseCounter(x[len(x)-2])
			if len(x) == 3 {
				v = int64(1)
			} else {
				v = x[:4]
			}
			c.safeReply(i, v)
			r.applied = isOne(x[len(x)-1])
			if r.fence = fence; !ok && r.err == nil {
				r.err = fmt.Errorf("unexpected fenced acquire reply %v", x)
			}
			return
		}
	}
	c.safeReply(i, v)
}

// fencedHandOverReply records instance i's reply to the fenced hand-over:
// {released, 1, counter, applied}, {released, 0} (held) or {released,
// code}.
func (c *call) fencedHandOverReply(i int, v any) {
	r := &c.res[i]
	a, _ := v.([]any)
	if len(a) != 2 && len(a) != 4 {
		r.err = fmt.Errorf("unexpected hand-over reply %v", v)
		return
	}
	rel, _ := a[0].(int64)
	r.released = rel == 1
	n, _ := a[1].(int64)
	switch {
	case n == 1 && len(a) == 4:
		r.n = 1
		var ok bool
		if r.fence, ok = parseCounter(a[2]); !ok {
			r.err = fmt.Errorf("unexpected hand-over reply %v", v)
		}
		r.applied = isOne(a[3])
	case n < 0:
		r.err = counterError(c.keys[len(c.keys)-1], n)
	case n != 0 || len(a) != 2:
		r.err = fmt.Errorf("unexpected hand-over reply %v", v)
	}
}

// isOne reports whether a script's reply element is the integer 1.
func isOne(x any) bool {
	n, _ := x.(int64)
	return n == 1
}

// FenceCounterTTL is how long a fence counter key lives on an instance
// after the last fence written to it (Options.Fence): every script that
// writes the counter sets this expiry again. A counter that expired is a
// counter lost without downtime: the next acquisition seeds it again from
// the instance's clock plus redisscript.FenceGuessAhead, which is above
// every fence issued before as long as the instances' clocks agree within
// the hour (docs/redlock-fencing.md, "Assumptions"). A lockswap before the
// counters expired seeds a missing counter from the clock alone, at most
// 20 ms below that: an hour after the last fence, that too is above it.
const FenceCounterTTL = time.Hour

// counterTTL holds FenceCounterTTL in milliseconds as a decimal string,
// boxed once so that sending it allocates nothing, whatever the client
// (tests shorten it: SetFenceCounterTTL).
var counterTTL atomic.Value

func init() { counterTTL.Store(any(strconv.FormatInt(FenceCounterTTL.Milliseconds(), 10))) }

// counterTTLArg is the fenced scripts' argument for the counter's expiry.
func counterTTLArg() any { return counterTTL.Load() }

// maxHints bounds a Locker's table of fence hints.
const maxHints = 4096

// clockGuessMargin is how far below redisscript.FenceGuessAhead above
// this host's clock a Locker guesses a fence from its clock: the guess is
// the clock + 20 ms − 5 ms, which the acquire script accepts (at most
// FenceGuessAhead above the server's clock) while this host's clock runs
// at most 5 ms ahead of the instances', plus the request's way there.
const clockGuessMargin = 5 * time.Millisecond

// fenceHints gives the fence a Locker guesses for each acquisition, so that
// the acquire round can install it (the fast path of
// docs/redlock-fencing.md): the higher of the highest fence it saw granted
// for the key plus one (a key it took last) and the host's clock in
// microseconds plus redisscript.FenceGuessAhead − clockGuessMargin (a key
// another Locker took since, more than a few milliseconds ago: a fence is
// at most FenceGuessAhead above the clocks of the masters when issued). A
// counter that is missing (a new key, an expired or lost counter) is
// seeded at the server's clock plus FenceGuessAhead, above any guess the
// script accepts, so the first acquisition of a key takes the write-back
// round. When an attempt that sent the clock's guess was granted a lower
// fence, the masters refused the guess (this host's clock runs ahead of
// theirs by more than clockGuessMargin), and for the next clockAheadFor
// the guesses for the key are its last fence plus one alone, which they
// accept when no other Locker took the key meanwhile; then the clock is
// tried again (a clock set right goes back to the clock's guesses). It
// remembers up to maxHints keys; past that a key chosen at random is
// forgotten for each new one, which only makes the next guess for it come
// from the clock. A guess is never a safety matter: the acquire script
// applies it only where the counter is below it, as the write-back does,
// and, for a guess other than counter + 1, only within FenceGuessAhead of
// the server's clock. A guess that does not apply costs the write-back
// round.
type fenceHints struct {
	mu   sync.Mutex
	hint map[string]fenceHint
	now  func() time.Time // the clock of the guesses (tests change it)
}

// fenceHint is what a Locker remembers of a key's last fence.
type fenceHint struct {
	fence int64 // the highest fence seen granted
	// hintOnly: until this time (the guess clock, µs), guess fence + 1
	// alone: the clock's guess was above a fence granted.
	hintOnly int64
}

// clockAheadFor is how long a Locker guesses a key's last fence plus one
// alone after its clock's guess came out above a fence granted for it.
const clockAheadFor = 10 * time.Second

func newFenceHints() *fenceHints {
	return &fenceHints{hint: make(map[string]fenceHint), now: time.Now}
}

// guess returns the fence to try for key, and the clock's guess it
// considered (for saw).
func (h *fenceHints) guess(key string) (g, clock int64) {
	h.mu.Lock()
	f, ok := h.hint[key]
	h.mu.Unlock()
	now := h.now().UnixMicro()
	clock = now + redisscript.FenceGuessAhead - clockGuessMargin.Microseconds()
	switch {
	case !ok:
		return clock, clock
	case now < f.hintOnly:
		return f.fence + 1, clock
	}
	return max(clock, f.fence+1), clock
}

// saw records that a lock on key was granted fence, by an attempt that
// sent the guess sent, its guess from the clock being clock.
func (h *fenceHints) saw(key string, fence, sent, clock int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.hint[key]
	if ok && f.fence >= fence {
		return
	}
	if !ok && len(h.hint) >= maxHints {
		for k := range h.hint { // a random one: map iteration starts anywhere
			delete(h.hint, k)
			break
		}
	}
	if sent == clock && clock > fence { // the clock's guess was sent and refused
		f.hintOnly = h.now().Add(clockAheadFor).UnixMicro()
	}
	f.fence = fence
	h.hint[key] = f
}
