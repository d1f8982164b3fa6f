package redlock

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap/redisclient"
)

// The adaptive per-instance timeout (Options.InstanceTimeout zero): see
// proto.instanceTimeout and docs/redlock.md, "Per-instance timeouts".
const (
	// MinInstanceTimeout is the least per-instance timeout the default
	// (adaptive) timeout ever gives, whatever the TTL: TTLRange's minimum
	// is computed with it, so that which TTLs a Locker accepts does not
	// depend on what its connections have shown.
	MinInstanceTimeout = 5 * time.Millisecond
	// InstanceTimeoutFloor is the least adaptive per-instance timeout when
	// the TTL leaves room for it: room for the scheduler delays of a loaded
	// machine, which the round trips measured on an idle one do not show
	// (a round trip waits for a CPU twice, for the server and for the
	// client's reader; 25 ms was not always enough on a loaded 2-core
	// machine).
	InstanceTimeoutFloor = 50 * time.Millisecond
	// InitialInstanceTimeout is the adaptive per-instance timeout of an
	// instance that has not answered yet (its first request may carry a
	// dial and a TLS handshake), and the most that doubling after timeouts
	// makes of it; measured round trips may give more.
	InitialInstanceTimeout = time.Second
)

// rtt is what the answers of one instance show of its round trips: a
// smoothed round-trip time and its mean deviation, as TCP keeps them
// (RFC 6298), and the timeout doubled after requests that got no answer
// (Karn's rule: a request without an answer gives no sample). It is safe
// for concurrent use.
type rtt struct {
	// est is 1<<63 | srtt<<32 | rttvar, both in microseconds (srtt below
	// 2^31); zero until the first sample.
	est atomic.Uint64
	// backoff, when positive, is the timeout after requests that timed
	// out: at least twice the timeout they had, at most
	// InitialInstanceTimeout. The next sample clears it.
	backoff atomic.Int64
}

const (
	rttSampled = 1 << 63
	rttMaxUs   = 1<<31 - 1
)

// sample records a round trip of d.
func (r *rtt) sample(d time.Duration) {
	us := min(max(d.Microseconds(), 1), rttMaxUs)
	for {
		old := r.est.Load()
		var srtt, rttvar int64
		if old == 0 {
			srtt, rttvar = us, us/2
		} else {
			srtt, rttvar = int64(old>>32&rttMaxUs), int64(old&(1<<32-1))
			diff := srtt - us
			if diff < 0 {
				diff = -diff
			}
			rttvar = (3*rttvar + diff) / 4
			srtt = (7*srtt + us) / 8
		}
		if r.est.CompareAndSwap(old, rttSampled|uint64(srtt)<<32|uint64(rttvar)) {
			break
		}
	}
	if r.backoff.Load() != 0 {
		r.backoff.Store(0)
	}
}

// timedOut records a request that got no answer within the timeout it
// was given.
func (r *rtt) timedOut(given time.Duration) {
	next := min(2*given, InitialInstanceTimeout)
	for {
		old := r.backoff.Load()
		if int64(next) <= old || r.backoff.CompareAndSwap(old, int64(next)) {
			return
		}
	}
}

// timeout is the instance's timeout: srtt + 4 × rttvar, at least
// InstanceTimeoutFloor; InitialInstanceTimeout before any sample; the
// backoff when it is longer.
func (r *rtt) timeout() time.Duration {
	d := InitialInstanceTimeout
	if e := r.est.Load(); e != 0 {
		srtt, rttvar := time.Duration(e>>32&rttMaxUs), time.Duration(e&(1<<32-1))
		d = max((srtt+4*rttvar)*time.Microsecond, InstanceTimeoutFloor)
	}
	return max(d, time.Duration(r.backoff.Load()))
}

// instanceTimeout is the per-instance timeout of a request for a lock of
// ttl: Options.InstanceTimeout when set; otherwise adaptive, the time
// within which a quorum of the instances answer by their own timeouts (the
// quorum-th shortest of rtt.timeout, so that a minority that stopped
// answering does not hold every call up), at most timeoutBudget(ttl).
func (p *proto) instanceTimeout(ttl time.Duration) time.Duration {
	if p.opts.InstanceTimeout > 0 {
		return p.opts.InstanceTimeout
	}
	var buf [64]time.Duration
	ts := buf[:len(p.fan.rtt)]
	for i := range ts {
		// Insertion sort: N is small.
		t, j := p.fan.rtt[i].timeout(), i
		for ; j > 0 && ts[j-1] > t; j-- {
			ts[j] = ts[j-1]
		}
		ts[j] = t
	}
	return max(min(ts[p.quorum-1], p.timeoutBudget(ttl)), MinInstanceTimeout)
}

// timeoutBudget is the longest per-instance timeout a lock of ttl allows:
// an answer at its end, with the drift allowance, leaves a quarter of the
// TTL as validity (see usable).
func (p *proto) timeoutBudget(ttl time.Duration) time.Duration {
	return ttl - ttl/4 - p.drift(ttl)
}

// writeBackDue is the deadline of a fenced acquisition's write-back
// round, for an acquisition that started at start: the instance timeout
// from now, or with the adaptive timeout, when later, the end of the
// TTL's budget from start (the instances asked have just answered, and
// whatever the round takes, the lock keeps a quarter of its TTL).
func (p *proto) writeBackDue(start time.Time, ttl time.Duration) time.Time {
	due := time.Now().Add(p.instanceTimeout(ttl))
	if p.opts.InstanceTimeout > 0 {
		return due
	}
	return latest(due, start.Add(p.timeoutBudget(ttl)))
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checkTimeout is the per-instance timeout that decides which TTLs a
// Locker accepts (usable): Options.InstanceTimeout when set, else
// MinInstanceTimeout, the least the adaptive timeout gives (which never
// exceeds timeoutBudget): it does not depend on what the connections
// have shown, so the TTL range is fixed when New returns.
func (p *proto) checkTimeout() time.Duration {
	if p.opts.InstanceTimeout > 0 {
		return p.opts.InstanceTimeout
	}
	return MinInstanceTimeout
}

// observe feeds instance i's outcome of c's request to its rtt: an
// answer (a reply, an error reply included) is a sample, unless it was
// first read only at the deadline, after the replies of other instances
// (the pipelined path: when it came is unknown); a failure at or after
// the call's deadline is a timeout, unless the call had ended
// before its deadline for another reason (the caller's context). It
// returns err, saying which timeout passed when that is what ended it.
func (c *call) observe(i int, err error) error {
	r := &c.lk.fan.rtt[i]
	now := time.Now()
	if err == nil || errors.Is(err, redisclient.ErrReply) {
		if !c.res[i].late {
			r.sample(now.Sub(c.sent))
		}
		return err
	}
	if now.Before(c.due) {
		return err // a transport error, or the caller's context ended
	}
	given := c.due.Sub(c.sent)
	r.timedOut(given)
	return &timeoutError{given: given, err: err}
}

// timeoutError is a request that got no answer within the instance
// timeout (or the round) it was given: an unknown outcome, not the
// caller's context.
type timeoutError struct {
	given time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no answer within %v: %v", e.given.Round(time.Microsecond), e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

// lateRead is the read timeout of a reply whose deadline has passed while
// the replies of instances read before it were awaited: a reply that has
// already arrived is read (a read with a past deadline fails without
// looking), a missing one costs this much.
const lateRead = time.Millisecond

// timeLeft is the read timeout for a reply due by deadline; at least
// lateRead (and never zero, which would mean none).
func timeLeft(deadline time.Time) time.Duration {
	return max(time.Until(deadline), lateRead)
}
