package redlock

import (
	"math"
	"time"
)

// The restart-safety quarantine and its arithmetic.
//
// Options.MaxTTL is at most lockswap.MaxTTL (365 days), as is every TTL
// (the kit's range), DriftFactor is below 0.5 and DriftFixed at most
// lockswap.MaxTTL. So the longest quarantine, MaxTTL + drift(MaxTTL), is
// under 365 d × 2.5 (2.5 years), the validity TTL − elapsed − drift stays
// within ±2 TTLs, and a deadline now + either is far from the ±292 years
// a time.Duration holds. What a server sends (its clock, an epoch that
// anything may have written) is not bounded: epochAge saturates, and the
// quarantine takes an epoch's age as zero at least, so it never exceeds
// MaxTTL + drift(MaxTTL) from the moment the client reads the epoch.

// epochAheadSlack is how far ahead of its server's clock an epoch may be
// without MsgEpochAhead: a clock stepped back by less (a correction by
// NTP) is not worth a warning. Either way the quarantine is the same.
const epochAheadSlack = time.Second

// maxQuarantine is the quarantine of an epoch made just now: MaxTTL, the
// longest a lock granted before the instance restarted can still be
// valid, plus the drift allowance of such a lock.
func (p *proto) maxQuarantine() time.Duration {
	return p.opts.MaxTTL + p.drift(p.opts.MaxTTL)
}

// quarantineLeft is how long an instance whose epoch is age old on its
// server's clock stays in quarantine from now: maxQuarantine less the
// age, and nothing once the age reaches it.
//
// An epoch of negative age lies in its server's future: the server's
// clock went back since the epoch was made (set wrong at boot, then
// corrected), or something other than this script wrote it. Its real age
// is unknown, but the epoch exists when the client reads it, so it was
// made (and the instance restarted) before now: a quarantine of
// maxQuarantine from now outlasts every lock the instance may have
// forgotten, and is the longest one needed. So a future epoch counts as
// made now: the quarantine is capped at maxQuarantine, never shortened
// below what the real age would need.
func (p *proto) quarantineLeft(age time.Duration) time.Duration {
	return max(p.maxQuarantine()-max(age, 0), 0)
}

// epochAge is the age of the epoch made at csec.cusec on a server whose
// clock reads sec.usec, saturated to what a time.Duration holds: both
// epochs (18 digits each) and a server's answer may be far out of range.
func epochAge(sec, usec, csec, cusec int64) time.Duration {
	const (
		limSec = 1 << 40 // seconds: 34,000 years, past any Duration
		limUS  = limSec * 1e6
		maxUS  = math.MaxInt64 / int64(time.Microsecond)
	)
	ds := min(max(subSat(sec, csec), -limSec), limSec)
	du := min(max(subSat(usec, cusec), -limUS), limUS)
	us := ds*1e6 + du // |us| ≤ 2 × limUS < 2^61: no overflow
	return time.Duration(min(max(us, -maxUS), maxUS)) * time.Microsecond
}

// subSat is a − b, saturated to the int64 range.
func subSat(a, b int64) int64 {
	d := a - b
	switch {
	case b > 0 && d > a:
		return math.MinInt64
	case b < 0 && d < a:
		return math.MaxInt64
	}
	return d
}
