package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/attempt"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/redisclient"
)

// rlock is a Redlock lock as the protocol keeps it: the Data of its
// driver.Claim. The kit runs one Extend or Release of a lock at a time,
// so its fields need no lock of their own.
type rlock struct {
	keys       [1]string
	key        any                    // keys[0], boxed once
	akeys      [3]string              // Fence: the acquire script's KEYS (key, [EpochKey,] counter)
	nakeys     int                    // Fence: how many of akeys
	fkeys      [1]string              // Fence: the fence counter's key
	fkey       any                    // Fence: fkeys[0], boxed once
	guess      int64                  // Fence: the fence the acquire tries first (fenceHints.guess; 0: none)
	clockGuess int64                  // Fence: the guess from the clock fenceHints.guess considered
	args       [2]any                 // token, ttl in ms (the scripts' ARGV)
	setGet     redisclient.SetGetArgs // the acquire's SET key token NX PX ms GET, from key and args
	acquired   time.Time
	deadline   time.Time // the validity's end, as last granted
	unknown    uint64    // instances whose SET of the acquisition had an unknown outcome
	extensions int
	grants     atomic.Int32 // instances that granted the acquisition or the last extension (Grants)
}

// newRlock makes c's Data for an attempt. The instances keep whole
// milliseconds (PX): c.TTL is truncated to them, so that the validity
// counts from what they keep.
func (p *proto) newRlock(c *driver.Claim[*rlock]) *rlock {
	c.TTL = c.TTL.Truncate(time.Millisecond)
	l := &rlock{}
	l.keys[0] = p.opts.Prefix + c.Key
	l.key = l.keys[0]
	if p.opts.Fence {
		l.fkeys[0] = FenceKey(l.keys[0])
		l.fkey = l.fkeys[0]
		l.akeys[0] = l.keys[0]
		if p.opts.RestartSafety {
			l.akeys[1], l.akeys[2], l.nakeys = EpochKey, l.fkeys[0], 3
		} else {
			l.akeys[1], l.nakeys = l.fkeys[0], 2
		}
	}
	l.args[0], l.args[1] = c.Token, c.TTL.Milliseconds()
	l.setGet.Fill(l.key, l.args[0], l.args[1])
	if p.opts.Fence {
		l.guess, l.clockGuess = p.hints.guess(l.keys[0])
	}
	c.Data = l
	return l
}

// ttl is the TTL l was acquired with, as the instances keep it.
func (l *rlock) ttl() time.Duration { return time.Duration(l.args[1].(int64)) * time.Millisecond }

// Acquire makes one attempt (driver.Driver): SET NX PX GET (or the
// restart-safe script) on every instance at once, each bounded by the
// per-instance timeout and ctx, then settle. The GET makes an instance
// refuse a key of another Redis type in the same request; where it could
// not (the restart-safe script, a Redis before 7.0) and the key is found
// held on the first attempt (c.First), one TYPE request finds out whether
// what holds it is a lock.
func (p *proto) Acquire(ctx context.Context, cl *driver.Claim[*rlock]) (driver.Grant, error) {
	l := p.newRlock(cl)
	ttl := cl.TTL
	if p.members != nil {
		if err := p.members.admit(ctx); err != nil {
			return driver.Grant{}, err
		}
	}
	c := p.fan.get()
	defer p.fan.put(c)
	c.op, c.keys, c.key, c.args, c.ttl, c.setGet = opAcquire, l.keys[:], l.key, l.args[:], ttl, &l.setGet
	if p.opts.Fence {
		c.keys, c.fkey, c.guess = l.akeys[:l.nakeys], l.fkey, l.guess
	}
	start := time.Now()
	p.fan.run(ctx, c, start.Add(p.instanceTimeout(ttl)))
	return p.settle(ctx, l, c, start, ttl, cl.First)
}

// settle decides an acquisition from its call's answers: the lock l when
// a majority set the key and validity remains, otherwise the error, after
// undoing the SET on every instance where it succeeded or may have.
//
// An instance that failed with an error retrying cannot fix (or, with
// check, holds a value of another type under the key) counts as failing:
// the attempt fails with ErrInvalid only when such instances leave no
// possible majority. Otherwise it is ErrHeld when the instances that hold
// the key for another owner (with the failing ones) leave no majority, and
// ErrUnavailable when the answers missing decide it.
func (p *proto) settle(ctx context.Context, l *rlock, c *call, start time.Time, ttl time.Duration, check bool) (driver.Grant, error) {
	elapsed := time.Since(start)
	n := len(p.inst)
	var votes, applied, held, quarantined, perm int
	var ok, unknown, heldMask, notLock uint64
	for i := range c.res {
		r, b := &c.res[i], uint64(1)<<i
		switch {
		case r.err != nil && isPermanent(r.err):
			perm++
			if r.err == errKeyNotLock {
				notLock |= b
			}
			if r.n == 1 { // the SET was done all the same (not by the safe acquire, which refuses a bad epoch before it writes)
				ok |= b
			}
		case r.err != nil:
			unknown |= b
		case r.quarantined:
			quarantined++
			if r.n == 1 {
				ok |= b
			}
		case r.n == 1:
			votes++
			ok |= b
			if r.applied {
				applied++
			}
		default:
			held++
			if r.plain || p.opts.RestartSafety { // no GET told the key's type
				heldMask |= b
			}
		}
	}
	validity := ttl - elapsed - p.drift(ttl)
	l.grants.Store(int32(votes))
	if votes >= p.quorum && validity > 0 && p.opts.Fence {
		if applied >= p.quorum {
			// The fast path: a majority granted the lock and applied the
			// guessed fence in the same script, a compare-and-set as the
			// write-back's (docs/redlock-fencing.md).
			l.acquired, l.unknown, l.deadline = start, unknown, start.Add(validity)
			p.hints.saw(l.keys[0], l.guess, l.guess, l.clockGuess)
			return driver.Grant{Deadline: l.deadline, Fence: uint64(l.guess)}, nil
		}
		return p.writeBack(ctx, l, c, ok, unknown, start, ttl)
	}
	if votes >= p.quorum && validity > 0 {
		l.acquired, l.unknown, l.deadline = start, unknown, start.Add(validity)
		return driver.Grant{Deadline: l.deadline}, nil
	}
	// The instances that refused the SET NX GET for a key of another type
	// did not say which: ask them, on this error path only, to name it.
	if notLock != 0 {
		for i, err := range p.checkTypes(ctx, l, notLock, ttl) {
			if err != nil {
				c.res[i].err = err
			}
		}
	}
	// What holds the key where it is held: a lock (a string) or not.
	var typeErrs []error
	if check && heldMask != 0 && votes < p.quorum && held+perm > n-p.quorum {
		if typeErrs = p.checkTypes(ctx, l, heldMask, ttl); typeErrs != nil {
			for i, err := range typeErrs {
				if err != nil {
					held--
					perm++
					heldMask &^= 1 << i
				}
			}
		}
	}
	p.undo(ctx, l, ok, unknown, ttl)
	switch {
	case votes >= p.quorum:
		return driver.Grant{}, fmt.Errorf("a majority said OK but it took %v, leaving no validity of the %v TTL (drift %v): %w",
			elapsed.Round(time.Microsecond), ttl, p.drift(ttl), lockswap.ErrUnavailable)
	case perm > n-p.quorum:
		return driver.Grant{}, p.invalid(perm, func(i int) error {
			if typeErrs != nil && typeErrs[i] != nil {
				return typeErrs[i]
			}
			if err := c.res[i].err; err != nil && isPermanent(err) {
				return err
			}
			return nil
		})
	case held+perm > n-p.quorum:
		var b strings.Builder
		fmt.Fprintf(&b, "%d of %d instances hold it for another owner, %d said OK (need %d)", held, n, votes, p.quorum)
		if perm > 0 {
			fmt.Fprintf(&b, "; %d failed with an error retrying cannot fix", perm)
			sep := ": "
			for i := range c.res {
				err := c.res[i].err
				if typeErrs != nil && typeErrs[i] != nil {
					err = typeErrs[i]
				}
				if err != nil && isPermanent(err) {
					fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, err)
					sep = "; "
				}
			}
		}
		return driver.Grant{}, fmt.Errorf("%s: %w", b.String(), lockswap.ErrHeld)
	default:
		return driver.Grant{}, p.outage(c, votes, held, perm)
	}
}

// checkTypes asks the instances in mask, which did not set the key because
// it exists, for the key's type. It returns nil when each holds a string
// (a lock, whoever's) or did not say; otherwise, per instance, the error
// that describes a value that is not a lock. It runs on the caller's time:
// ctx is the attempt's request context (the kit's, see internal/attempt, whose
// deadline already has the grace), and the check ends with it; an
// instance that has not answered by then did not say, and when ctx has
// already ended nothing is asked.
func (p *proto) checkTypes(ctx context.Context, l *rlock, mask uint64, ttl time.Duration) []error {
	if attempt.Ended(ctx) {
		return nil
	}
	c := p.fan.get()
	defer p.fan.put(c)
	c.op, c.keys, c.key, c.mask = opType, l.keys[:], l.key, mask
	until := time.Now().Add(p.cleanupRound(ttl))
	if d, ok := ctx.Deadline(); ok {
		until = earliest(until, d)
	}
	p.fan.run(ctx, c, until)
	var errs []error
	for i := range c.res {
		var nl *notLockError
		if c.mask&(1<<i) != 0 && errors.As(c.res[i].err, &nl) {
			if errs == nil {
				errs = make([]error, len(c.res))
			}
			errs[i] = c.res[i].err
		}
	}
	return errs
}

// undo gives back a failed acquisition of l: the compare-and-delete on the
// instances in ok (which said OK, or may have set it despite an error)
// now, for a round of cleanupRound bounded by ctx, and on those in unknown
// (no answer in time, an error) and those that did not answer that round
// in the background, until lockswap.CleanupTimeout. ctx is the context the
// acquisition ran under: the attempt's request context (internal/attempt:
// the caller's deadline plus the grace already, so none is added here), or
// a release's for a hand-over. When ctx has already ended, nothing is sent
// on the caller's time: it all goes to the background. The acquire's short
// per-instance timeout bounds none of it.
func (p *proto) undo(ctx context.Context, l *rlock, ok, unknown uint64, ttl time.Duration) {
	if ok|unknown == 0 {
		return
	}
	start := time.Now()
	pending := unknown
	if ok != 0 && attempt.Ended(ctx) {
		pending |= ok
	} else if ok != 0 {
		c := p.fan.get()
		c.op, c.keys, c.key, c.args, c.mask = opRelease, l.keys[:], l.key, l.args[:1], ok
		round := start.Add(p.cleanupRound(ttl))
		if d, ok := ctx.Deadline(); ok {
			round = earliest(round, d)
		}
		p.fan.run(ctx, c, round)
		t := tally{pending: ok}
		t.add(c, false)
		p.fan.put(c)
		pending |= t.pending
	}
	if pending != 0 {
		p.goRelease(l.keys, l.key, l.args[0], pending, start.Add(lockswap.CleanupTimeout), ttl)
	}
}

// outage builds the error of an acquisition that the answers missing
// leave undecided: ErrUnavailable.
func (p *proto) outage(c *call, votes, held, perm int) error {
	var b strings.Builder
	n := len(p.inst)
	answered := votes + held + perm
	if answered < p.quorum {
		fmt.Fprintf(&b, "%d of %d instances answered (need %d)", answered, n, p.quorum)
	} else {
		fmt.Fprintf(&b, "%d of %d instances said OK, %d hold it for another owner, %d did not answer or do not count (need %d OKs, or %d held, to decide)",
			votes, n, held, n-answered, p.quorum, n-p.quorum+1)
	}
	sep := ": "
	for i := range c.res {
		r := &c.res[i]
		switch {
		case r.err != nil:
			fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, r.err)
		case r.quarantined:
			fmt.Fprintf(&b, "%s%s: restarted, votes not counted for %v more", sep, p.inst[i].c, r.left.Round(time.Millisecond))
		default:
			continue
		}
		sep = "; "
	}
	return &outageError{msg: b.String()}
}

// undecided builds the error of a release or an extension that the
// answers missing leave undecided: ErrUnavailable. yesWhat says what a
// yes is ("removed our key").
func (p *proto) undecided(yesWhat string, t *tally) error {
	var b strings.Builder
	n := len(p.inst)
	fmt.Fprintf(&b, "outcome unknown: %d of %d instances %s, %d no longer held our token, %d did not answer (need %d to agree)",
		ones(t.yes), n, yesWhat, ones(t.no), ones(t.pending|t.perm), p.quorum)
	sep := ": "
	for i, err := range t.errs {
		if err != nil && (t.pending|t.perm)&(1<<i) != 0 {
			fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, err)
			sep = "; "
		}
	}
	return &outageError{msg: b.String()}
}

// invalid builds the ErrInvalid error of an operation that instances
// failing with errors retrying cannot fix leave without a possible
// majority; errAt gives instance i's error (nil if it did not fail so).
func (p *proto) invalid(failed int, errAt func(i int) error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d instances failed with an error retrying cannot fix, which leaves no possible majority (need %d)",
		failed, len(p.inst), p.quorum)
	sep := ": "
	var reasons []string
	for i := range p.inst {
		err := errAt(i)
		if err == nil {
			continue
		}
		fmt.Fprintf(&b, "%s%s: %v", sep, p.inst[i].c, err)
		sep = "; "
		if r := permanentReason(err); r != "" && !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	for _, r := range reasons {
		b.WriteString(" (")
		b.WriteString(r)
		b.WriteString(")")
	}
	return fmt.Errorf("%s: %w", b.String(), lockswap.ErrInvalid)
}

// notLockError is an instance's answer that shows a value that is not a
// lockswap one where the lock needs one: a value of another Redis type
// under the key, or an epoch key that does not hold an epoch. Retrying
// cannot fix it.
type notLockError struct {
	msg, reason string
}

func (e *notLockError) Error() string { return e.msg }

// isPermanent reports whether err is an instance's failure that retrying
// cannot fix.
func isPermanent(err error) bool {
	var nl *notLockError
	return errors.As(err, &nl) || redisclient.IsPermanent(err)
}

// permanentReason says what to fix for an error isPermanent accepts.
func permanentReason(err error) string {
	var nl *notLockError
	if errors.As(err, &nl) {
		return nl.reason
	}
	return redisclient.PermanentReason(err)
}

// outageError is the error of an operation that no majority of instances
// answered. It matches lockswap.ErrUnavailable.
type outageError struct{ msg string }

func (e *outageError) Error() string        { return e.msg + ": " + lockswap.ErrUnavailable.Error() }
func (e *outageError) Is(target error) bool { return target == lockswap.ErrUnavailable }

// parseEpochReply reads the safe acquire script's array reply: {r, epoch,
// sec, usec} (whether the SET was done, the epoch, and the epoch's age on
// the server's clock, saturated: negative for an epoch in the server's
// future), or {-1, epoch} when the script refused an epoch that is not
// one, without writing anything.
func parseEpochReply(v []any) (set bool, epoch string, age time.Duration, err error) {
	var n int64
	if len(v) > 0 {
		n, _ = v[0].(int64)
	}
	if len(v) == 2 && n == -1 {
		epoch, _ = v[1].(string)
		return false, "", 0, badEpochError(epoch)
	}
	if len(v) != 4 {
		return false, "", 0, fmt.Errorf("unexpected acquire reply %v", v)
	}
	epoch, _ = v[1].(string)
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[3]), 10, 64)
	if err1 != nil || err2 != nil {
		return false, "", 0, fmt.Errorf("unexpected acquire reply %v", v)
	}
	csec, cusec, ok := validEpoch(epoch)
	if !ok {
		// The script refuses such an epoch before it writes; a reply that
		// still carries one says whether the SET was done, to be undone.
		return n == 1, "", 0, badEpochError(epoch)
	}
	age = epochAge(sec, usec, csec, cusec)
	return n == 1, epoch, age, nil
}

// validEpoch parses an epoch, "sec.usec.tag" (the server's TIME when it
// was made, and a tag), and reports false for any other value. It is the
// safe acquire script's check: 1 to 18 ASCII digits in each number, so
// that both fit an int64.
func validEpoch(epoch string) (sec, usec int64, ok bool) {
	parts := strings.SplitN(epoch, ".", 3)
	if len(parts) != 3 {
		return 0, 0, false
	}
	var n [2]int64
	for i, p := range parts[:2] {
		if len(p) == 0 || len(p) > 18 {
			return 0, 0, false
		}
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return 0, 0, false
			}
			n[i] = n[i]*10 + int64(p[j]-'0')
		}
	}
	return n[0], n[1], true
}

// badEpochError is the error of an instance whose epoch key holds
// something that is not an epoch.
func badEpochError(epoch string) error {
	return &notLockError{
		msg:    fmt.Sprintf("epoch %s under %s is not a lockswap epoch", lockstate.QuoteKey(epoch), EpochKey),
		reason: "delete the key " + EpochKey + " on that instance (its votes then wait MaxTTL, as after a restart)",
	}
}
