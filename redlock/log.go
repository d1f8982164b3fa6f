package redlock

import (
	"context"
	"log/slog"
	"math/bits"
	"time"
)

// The messages of the records redlock writes to Options.Logger, besides
// the kit's (driver.MsgLockLost and the others); docs/observability.md
// lists their attributes.
const (
	// MsgQuarantine: with RestartSafety, instances whose epoch is younger
	// than MaxTTL (first use of a fresh server, or a restart without
	// persistence) do not vote until it is MaxTTL old; while a majority
	// cannot vote, Acquire waits. Written once per quarantine, at level
	// Warn.
	MsgQuarantine = "restart-safety quarantine"
	// MsgReleaseGaveUp: instances that did not answer a release were asked
	// again in the background until lockswap.CleanupTimeout without an
	// answer; the lock stays on them until its TTL passes. Level Warn.
	MsgReleaseGaveUp = "release gave up"
	// MsgEpochAhead: with RestartSafety, instances whose epoch lies more
	// than a second in their own clock's future (the clock went back since
	// the epoch was made, or something else wrote the key). Their age is
	// unknown, so each client quarantines them for MaxTTL plus the drift
	// allowance from when it first reads the epoch, the longest needed,
	// until the clock passes the epoch. Written with the MsgQuarantine it
	// causes, at level Warn.
	MsgEpochAhead = "restart-safety epoch ahead of the server's clock"
	// MsgDurabilityRisk: with Fence or RestartSafety, a master whose
	// settings let a crash bring a counter or the epoch back older
	// (appendfsync other than always, RDB snapshots without the
	// append-only file) or let memory pressure evict them (an allkeys-*
	// maxmemory-policy): fences can repeat, and a restart can go
	// unnoticed. Read once per Locker, at New; one record per master, at
	// level Warn.
	MsgDurabilityRisk = "master settings can lose fence counters or epochs"
	// MsgDurabilityUnknown: with Fence or RestartSafety, the masters whose
	// settings New could not read (CONFIG GET denied, or no answer). One
	// record, at level Warn.
	MsgDurabilityUnknown = "master settings unknown"
	// MsgMembersUnchecked: with Fence, the masters whose address the
	// client does not say (a redigo pool given none, a go-redis failover
	// client; one record at New), or that refuse the membership script (an
	// ACL without its rights; one record, at the first round that meets
	// it): the Locker cannot register its set of masters (MembersKey) or
	// compare it with other clients', and acquires without. Level Warn.
	MsgMembersUnchecked = "masters not registered"
)

// epochAheadReason is the reason attribute of MsgEpochAhead.
const epochAheadReason = "the epoch is later than the server's clock: the clock went back, or something else wrote " + EpochKey + "; every new client quarantines the instance for max_ttl: fix the clock, or delete the key (one more quarantine)"

// quarantineReason is the reason attribute of MsgQuarantine.
const quarantineReason = "epoch younger than MaxTTL: the instance is new or restarted without its data, so a lock it forgot may still be held"

// logQuarantine writes MsgQuarantine once for the instances that entered
// a quarantine not logged yet: several calls seeing the same new epochs
// write one record. The calls take turns (p.logMu), so that two calls
// ending at once do not split the instances they both see between two
// records; a call that sees nothing new, nearly all of them, does not
// take the lock.
func (p *proto) logQuarantine() {
	if !p.quarantineUnlogged(time.Now()) {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	now := time.Now()
	var (
		servers, aheadOf []string
		left, ahead      time.Duration
	)
	quarantined := 0
	for i := range p.inst {
		in := &p.inst[i]
		es, unlogged := in.quarantine(now)
		if es == nil {
			continue
		}
		quarantined++
		if !unlogged {
			continue
		}
		in.logged.Store(es)
		servers = append(servers, in.c.String())
		left = max(left, es.until.Sub(now))
		if es.ahead > epochAheadSlack {
			aheadOf = append(aheadOf, in.c.String())
			ahead = max(ahead, es.ahead)
		}
	}
	if len(servers) == 0 {
		return
	}
	if len(aheadOf) > 0 {
		p.log.LogAttrs(context.Background(), slog.LevelWarn, MsgEpochAhead,
			slog.String("reason", epochAheadReason),
			slog.Duration("ahead", ahead.Round(time.Millisecond)),
			slog.Any("instances", aheadOf),
			slog.Duration("max_ttl", p.opts.MaxTTL))
	}
	p.log.LogAttrs(context.Background(), slog.LevelWarn, MsgQuarantine,
		slog.String("reason", quarantineReason),
		slog.Duration("left", left.Round(time.Millisecond)),
		slog.Any("instances", servers),
		slog.Int("quarantined", quarantined),
		slog.Int("of", len(p.inst)),
		slog.Int("quorum", p.quorum),
		slog.Bool("acquire_waits", len(p.inst)-quarantined < p.quorum),
		slog.Duration("max_ttl", p.opts.MaxTTL))
}

// logReleaseGaveUp writes MsgReleaseGaveUp for the release of storedKey
// that left the instances in pending unanswered.
func (p *proto) logReleaseGaveUp(storedKey string, pending uint64, ttl time.Duration) {
	attrs := []slog.Attr{
		slog.Int("unanswered", bits.OnesCount64(pending)),
		slog.Int("of", len(p.inst)),
		slog.Duration("expires_within", ttl),
	}
	if p.opts.LogKeys {
		attrs = append(attrs, slog.String("key", storedKey))
	}
	p.log.LogAttrs(context.Background(), slog.LevelWarn, MsgReleaseGaveUp, attrs...)
}

// quarantineUnlogged reports whether an instance is in a quarantine that
// has not been logged.
func (p *proto) quarantineUnlogged(now time.Time) bool {
	for i := range p.inst {
		if _, unlogged := p.inst[i].quarantine(now); unlogged {
			return true
		}
	}
	return false
}

// quarantine returns the epoch that keeps the instance in quarantine at
// now (nil when it is not in one), and whether that quarantine has not
// been logged yet.
func (in *instance) quarantine(now time.Time) (es *epochState, unlogged bool) {
	es = in.epoch.Load()
	if es == nil || !now.Before(es.until) {
		return nil, false
	}
	prev := in.logged.Load()
	return es, prev == nil || prev.value != es.value
}
