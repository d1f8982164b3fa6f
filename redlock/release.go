package redlock

import (
	"context"
	"fmt"
	"math/bits"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// MinCleanupRound is the least time a release, an undo or an extension
// gives the instances to answer before it asks those that have not
// answered again; the per-instance timeout, when longer, is used instead.
// It is not the acquire's per-instance timeout: nothing is lost by waiting
// for these answers, and an answer read too late under load costs a
// request more.
const MinCleanupRound = 250 * time.Millisecond

// cleanupRound bounds one round of a release, an undo or an extension.
func (p *proto) cleanupRound(ttl time.Duration) time.Duration {
	return max(MinCleanupRound, p.instanceTimeout(ttl))
}

// Retry delays between rounds of a release or an extension, doubling.
const (
	roundBackoffMin = 5 * time.Millisecond
	roundBackoffMax = 100 * time.Millisecond
)

// goRelease goes on, on a goroutine of the Locker's background group,
// with the compare-and-delete of token under key on the instances in
// pending, until each has answered, until passes, or Close stops it. It
// reports false, doing nothing, when the Locker is closed.
func (p *proto) goRelease(keys [1]string, key, token any, pending uint64, until time.Time, ttl time.Duration) bool {
	p.bgRunning.Add(1)
	started := p.bg.Go(func(ctx context.Context) {
		defer p.bgRunning.Add(-1)
		// A request whose answer was not read may still be waiting on the
		// server, on its discarded connection: give it a moment to run
		// first, so that this one, on another connection, comes after it.
		sleepUntil(ctx, time.Now().Add(roundBackoffMin))
		t := tally{pending: pending}
		args := [1]any{token}
		p.rounds(ctx, opRelease, keys[:], key, args[:], &t, until, ttl, nil)
		if t.pending != 0 {
			p.bgGaveUp.Add(1)
			if p.log != nil {
				p.logReleaseGaveUp(keys[0], t.pending, ttl)
			}
		}
	})
	if !started {
		p.bgRunning.Add(-1)
		p.bgGaveUp.Add(1)
	}
	return started
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// rounds asks again, round after round, the instances in t.pending (whose
// last outcome is unknown) until none is left, decided(t) reports that
// the outcome is settled, ctx ends or until passes. The first round gives
// the instances cleanupRound(ttl), each next one twice as long. A retried compare-and-delete that finds no
// key of ours counts as a removal: the request whose answer was lost may
// have removed it.
//
// Without decided (a background release), an instance is done only when
// it answered that it deleted our key, or answered twice, one request
// after the other: a SET whose answer was lost may still be waiting on
// the server, on its discarded connection, and run after a request sent
// later on another connection. The server reads every connection with
// data before it answers the first request, so the second request runs
// after the lost one.
func (p *proto) rounds(ctx context.Context, op opKind, keys []string, key any, args []any, t *tally, until time.Time, ttl time.Duration, decided func(*tally) bool) {
	backoff, round := roundBackoffMin, p.cleanupRound(ttl)
	for t.pending != 0 && (decided == nil || !decided(t)) {
		end := until
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			return
		}
		c := p.fan.get()
		c.op, c.keys, c.key, c.args, c.mask = op, keys, key, args, t.pending
		if op == opExtend {
			c.ttl = ttl
		}
		p.fan.run(ctx, c, earliest(now.Add(round), end))
		// An instance slower than a round would never answer in time: its
		// request goes with the connection a late answer discards.
		round *= 2
		asked := c.mask
		t.add(c, true)
		p.fan.put(c)
		if decided == nil {
			// Answered once without deleting anything: ask once more.
			again := asked &^ t.pending &^ t.perm &^ t.del &^ t.once
			t.once |= again
			t.pending |= again
		}
		if t.pending == 0 || (decided != nil && decided(t)) {
			return
		}
		sleepUntil(ctx, earliest(time.Now().Add(backoff), end))
		backoff = min(2*backoff, roundBackoffMax)
	}
}

// tally is what a release or an extension learned from each instance, as
// masks of instances.
type tally struct {
	yes     uint64  // removed (extended)
	no      uint64  // answered that our token was not there
	perm    uint64  // failed with an error retrying cannot fix
	pending uint64  // outcome unknown (an error or no answer in time)
	del     uint64  // answered that it deleted our key (or extended it)
	once    uint64  // background: answered once, without deleting anything
	errs    []error // per instance, the last error of a pending or failed one (nil until there is one)
}

// add records the answers of c's instances. retried: c asked again
// instances whose earlier outcome is unknown.
func (t *tally) add(c *call, retried bool) {
	for i := range c.res {
		b := uint64(1) << i
		if c.mask&b == 0 {
			continue
		}
		r := &c.res[i]
		t.pending &^= b
		switch {
		case c.op == opHandOver && r.released:
			// Our key was deleted, whatever became of the waiter's
			// attempt (a fenced one may have failed on its counter).
			t.yes |= b
			t.del |= b
		case r.err != nil:
			if isPermanent(r.err) {
				t.perm |= b
			} else {
				t.pending |= b
			}
			if t.errs == nil {
				t.errs = make([]error, len(c.res))
			}
			t.errs[i] = r.err
		case c.op != opHandOver && r.n == 1:
			t.yes |= b
			t.del |= b
		case c.op == opRelease && retried:
			t.yes |= b
		default:
			t.no |= b
		}
	}
}

// decided reports whether the outcome of a release or an extension over n
// instances with quorum q no longer depends on the pending instances: a
// quorum said yes, more than n−q said our token is not there, or with the
// failed ones no quorum of yes is possible.
func (t *tally) decided(n, q int) bool {
	yes, no, pending := ones(t.yes), ones(t.no), ones(t.pending)
	return yes >= q || no > n-q || yes+pending < q
}

func ones(m uint64) int { return bits.OnesCount64(m) }

// Extend asks for ttl more validity, from now (driver.Driver). It sends
// the compare-and-pexpire to every instance and asks again those whose
// outcome is unknown (an error, no answer in time), round after round,
// until a majority extended it or no majority can, within ctx's deadline
// (the kit's request bound), the lock's current deadline and
// lockswap.CleanupTimeout; the acquire's per-instance timeout does not
// bound it. The new deadline counts from before the first request.
// Errors: ErrLost when more than N − quorum instances no longer hold our
// token (or a majority answered too late), or past Options.MaxExtensions
// or Options.MaxHold; ErrInvalid when errors retrying cannot fix leave no
// possible majority; ErrUnavailable when the answers missing leave it
// undecided.
func (p *proto) Extend(ctx context.Context, cl *driver.Claim[*rlock], ttl time.Duration) (driver.Grant, error) {
	l := cl.Data
	ttl = ttl.Truncate(time.Millisecond)
	if m := p.opts.MaxExtensions; m > 0 && l.extensions >= m {
		return driver.Grant{}, fmt.Errorf("extended %d times already, the limit: %w", m, lockswap.ErrLost)
	}
	if m := p.opts.MaxHold; m > 0 && time.Now().Add(ttl).After(l.acquired.Add(m)) {
		return driver.Grant{}, fmt.Errorf("%v more would pass the maximum hold time %v: %w", ttl, m, lockswap.ErrLost)
	}
	deadline := l.deadline
	start := time.Now()
	// An extension answered after the current deadline is no use.
	until := earliest(deadline, start.Add(lockswap.CleanupTimeout))
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	args := [2]any{l.args[0], ttl.Milliseconds()}
	c := p.fan.get()
	c.op, c.keys, c.key, c.args, c.ttl = opExtend, l.keys[:], l.key, args[:], ttl
	p.fan.run(ctx, c, earliest(start.Add(p.cleanupRound(ttl)), until))
	var t tally
	t.add(c, false)
	p.fan.put(c)
	n, q := len(p.inst), p.quorum
	decided := func(t *tally) bool { return t.decided(n, q) }
	p.rounds(ctx, opExtend, l.keys[:], l.key, args[:], &t, until, ttl, decided)
	yes, no, perm := ones(t.yes), ones(t.no), ones(t.perm)
	switch {
	case yes >= q && time.Now().Before(deadline):
		l.deadline = start.Add(ttl - p.drift(ttl))
		l.extensions++
		l.grants.Store(int32(yes))
		return driver.Grant{Deadline: l.deadline}, nil
	case yes >= q:
		return driver.Grant{}, fmt.Errorf("a majority extended it but only after the validity ended: %w", lockswap.ErrLost)
	case no > n-q:
		// So many instances no longer hold our token that no majority can.
		return driver.Grant{}, fmt.Errorf("%d of %d instances no longer hold our token: %w", no, n, lockswap.ErrLost)
	case yes+ones(t.pending) < q:
		return driver.Grant{}, p.invalid(perm, t.permErr)
	default:
		return driver.Grant{}, p.undecided("extended it", &t)
	}
}

// permErr returns instance i's error if it failed with one retrying
// cannot fix.
func (t *tally) permErr(i int) error {
	if t.perm&(1<<i) == 0 || t.errs == nil {
		return nil
	}
	return t.errs[i]
}

// Release removes the lock (driver.Driver): the compare-and-delete on
// every instance. It asks again the instances whose outcome is unknown
// (an error, no answer in time), round after round, until the outcome is
// decided, within ctx's deadline (the kit's request bound: the caller's
// deadline plus lockswap.DeadlineGrace, at most lockswap.CleanupTimeout);
// the acquire's per-instance timeout does not bound it. Whatever is still
// unknown when it returns goes on in the background, until CleanupTimeout
// from the start (Locker.Close lets it run for up to
// background.CloseWait, then stops it and waits for it), so that the key
// is removed from every instance that answers in that time.
//
// It returns nil when a majority removed our key, an error matching
// ErrLost when more than N − quorum instances no longer held our token,
// ErrInvalid when errors retrying cannot fix leave no possible majority,
// and ErrUnavailable when the deadline came with the outcome undecided
// (the release goes on in the background). Every error is wrapped by
// driver.GaveUp: once Release has returned, with or without an error, the
// lock has ended and calling it again does nothing and returns nil.
func (p *proto) Release(ctx context.Context, cl *driver.Claim[*rlock]) error {
	l := cl.Data
	start := time.Now()
	until := p.until(ctx, start)
	ttl := l.ttl()
	c := p.fan.get()
	c.op, c.keys, c.key, c.args = opRelease, l.keys[:], l.key, l.args[:1]
	p.fan.run(ctx, c, earliest(start.Add(p.cleanupRound(ttl)), until))
	var t tally
	t.add(c, false)
	p.fan.put(c)
	return p.released(ctx, l, &t, start, until)
}

// HandOver releases held and, in the same request on each instance, makes
// next's attempt (driver.HandOver: redisscript.HandOver, the
// compare-and-delete, then next's SET NX PX; with Fence, fencedHandOver,
// whose acquire part answers as fencedAcquire does). The round is also
// next's acquisition, bounded by its per-instance timeout so that its
// validity is protected, and decided like any other (settle, which with
// Fence does next's write-back round before next gets its lock); what it
// leaves unknown of held's release is asked again as Release does.
func (p *proto) HandOver(ctx context.Context, hc, nc *driver.Claim[*rlock]) (driver.Grant, error, func() error) {
	l := hc.Data
	next := p.newRlock(nc)
	start := time.Now()
	until := p.until(ctx, start)
	c := p.fan.get()
	c.op, c.keys, c.key, c.args = opHandOver, l.keys[:], l.key, []any{l.args[0], next.args[0], next.args[1]}
	if p.opts.Fence {
		c.keys, c.fkey = next.akeys[:next.nakeys], next.fkey
		c.args = append(c.args, next.guess, counterTTLArg())
	}
	p.fan.run(ctx, c, earliest(start.Add(p.instanceTimeout(nc.TTL)), until))
	g, acqErr := p.settle(ctx, next, c, start, nc.TTL, false)
	var t tally
	t.add(c, false)
	p.fan.put(c)
	// The waiter has its answer from the first round; the release may
	// need more rounds.
	return g, acqErr, func() error { return p.released(ctx, l, &t, start, until) }
}

// until is the end of a release that starts at start under ctx: ctx's
// deadline (the kit's request bound), at most lockswap.CleanupTimeout.
func (p *proto) until(ctx context.Context, start time.Time) time.Time {
	until := start.Add(lockswap.CleanupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	return until
}

// released decides the release of l, whose first round (started at
// start) is in t: more rounds until, then the background for what is
// still unknown, and the outcome.
func (p *proto) released(ctx context.Context, l *rlock, t *tally, start, until time.Time) error {
	// A release is decided by a plain majority, not the quorum with
	// Options.Failovers: up to Failovers of the lock's masters may have
	// forgotten it (the failover the margin is for) while it is still
	// ours, and that is no lost lock.
	n, q := len(p.inst), len(p.inst)/2+1
	decided := func(t *tally) bool { return t.decided(n, q) }
	ttl := l.ttl()
	p.rounds(ctx, opRelease, l.keys[:], l.key, l.args[:1], t, until, ttl, decided)
	// Go on with what is unknown, and make sure of the instances where
	// the acquisition's SET had an unknown outcome and nothing was
	// deleted: it may still come (see rounds).
	end := start.Add(lockswap.CleanupTimeout)
	if bg := t.pending | (l.unknown &^ t.del &^ t.perm); bg != 0 && time.Now().Before(end) {
		p.goRelease(l.keys, l.key, l.args[0], bg, end, ttl)
	}
	// Whatever the outcome, the lock is given up: what is left is the
	// background's (driver.GaveUp).
	yes, no := ones(t.yes), ones(t.no)
	switch {
	case yes >= q:
		return nil
	case no > n-q:
		return driver.GaveUp(fmt.Errorf("%d of %d instances no longer held our token: %w", no, n, lockswap.ErrLost))
	case yes+ones(t.pending) < q:
		return driver.GaveUp(p.invalid(ones(t.perm), t.permErr))
	default:
		err := p.undecided("removed our key", t)
		return driver.GaveUp(fmt.Errorf("%w (the release goes on in the background, for up to %v from its start)", err, lockswap.CleanupTimeout))
	}
}
