package driver

import (
	"context"
	"log/slog"
	"time"
)

// The messages of the records the kit writes to [Config.Logger]; each
// record also has the attributes listed in docs/observability.md.
const (
	// MsgLockLost: a lock ended before its holder released it (its
	// deadline passed, an Extend or the Release found it not ours, or the
	// driver reported it lost with Claim.Lose). Level Warn.
	MsgLockLost = "lock lost"
	// MsgReleaseFailed: a Release failed; the lock is left to expire.
	// Level Warn.
	MsgReleaseFailed = "release failed"
	// MsgReleaseGaveUp: a release whose outcome stayed unknown was retried
	// in the background until lockswap.CleanupTimeout without an answer;
	// the lock is left to expire. Level Warn.
	MsgReleaseGaveUp = "release gave up"
	// MsgGiveBackFailed: a lock nobody was handed (taken after its caller
	// gave up, or as the Locker closed) could not be given back; it is
	// left to expire. Level Warn.
	MsgGiveBackFailed = "give-back failed"
	// MsgUndoGaveUp: an attempt whose outcome was unknown may have taken
	// the lock, and releasing it in the background got no answer until
	// lockswap.CleanupTimeout; it is left to expire. Level Warn.
	MsgUndoGaveUp = "undo gave up"
)

// Reasons of [MsgLockLost] (attribute "reason").
const (
	ReasonExpired       = "expired"             // the deadline passed before Release (attribute "overdue")
	ReasonExtendRefused = "extend refused"      // the backend said the lock is not ours any more
	ReasonNotOurs       = "not ours at release" // the Release found the lock gone or taken over
	ReasonDriverLost    = "reported by backend" // the driver called Claim.Lose (a watch, a lease)
)

// logger is the kit's logger: nil when Config.Logger is nil, so that the
// hot path pays one nil check and nothing else.
type logger struct {
	l    *slog.Logger // with the "backend" attribute
	keys bool         // Config.LogKeys
}

func newLogger(cfg Config) logger {
	if cfg.Logger == nil {
		return logger{}
	}
	return logger{l: cfg.Logger.With(slog.String("backend", cfg.Name)), keys: cfg.LogKeys}
}

// on reports whether records are written.
func (g logger) on() bool { return g.l != nil }

// warn writes one record about key at level Warn; key is included only
// with Config.LogKeys.
func (g logger) warn(msg, key string, attrs ...slog.Attr) {
	if g.l == nil {
		return
	}
	ctx := context.Background()
	if !g.l.Enabled(ctx, slog.LevelWarn) {
		return
	}
	if g.keys {
		attrs = append(attrs, slog.String("key", key))
	}
	g.l.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// expiresIn is the attribute that says when a lock left behind expires.
func expiresIn(deadline time.Time) slog.Attr {
	return slog.Duration("expires_in", max(time.Until(deadline), 0).Round(time.Millisecond))
}

func errAttr(err error) slog.Attr { return slog.String("error", err.Error()) }

// Bits of lock.flags, one word so that logging makes no lock bigger.
const (
	flagLost     = 1 << iota // the driver called Claim.Lose
	flagHeld                 // granted: a loss from now on is reported
	flagReported             // MsgLockLost was written (once per lock)
)

// reportLost writes MsgLockLost for l once, unless l was released or its
// Locker is closing: Close ending the locks it holds (etcdlease revokes
// their leases) is a shutdown, not an event to warn about.
func (l *lock[D]) reportLost(reason string, attrs ...slog.Attr) {
	if !l.lk.log.on() || l.released.Load() || l.lk.closed.Load() || l.flags.Or(flagReported)&flagReported != 0 {
		return
	}
	l.lk.log.warn(MsgLockLost, l.c.Key, append(attrs, slog.String("reason", reason))...)
}

// reportExpired writes MsgLockLost for l, held past its deadline, once.
func (l *lock[D]) reportExpired() {
	if !l.lk.log.on() {
		return
	}
	if over := time.Since(l.Deadline()); over >= 0 {
		l.reportLost(ReasonExpired, slog.Duration("overdue", over.Round(time.Millisecond)))
	}
}

// reportFailed writes msg (MsgReleaseFailed or MsgReleaseGaveUp), or
// MsgGiveBackFailed for a give-back, about l, which is left to expire.
func (l *lock[D]) reportFailed(msg string, giveBack bool, err error) {
	if giveBack {
		msg = MsgGiveBackFailed
	}
	l.lk.log.warn(msg, l.c.Key, errAttr(err), expiresIn(l.State.Deadline()))
}
