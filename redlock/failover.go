package redlock

import (
	"fmt"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// Failovers (Options.Failovers) is the margin of grants a lock keeps for
// the masters that lose it while it is valid. A Redis master that fails
// over to an asynchronous replica which never received the lock (or
// restarts without persistence, or is flushed) forgets the grant it gave.
// A lock granted by a bare majority, N/2+1, is then granted by a minority,
// and a second client can take the majority it needs: plain Redlock keeps
// exclusion across a failover only when the holder happened to get more
// grants than a bare majority. With Failovers f, an acquisition or an
// extension succeeds only when N/2+1+f instances granted it (the quorum
// is N/2+1+f): after f of them forget it, N/2+1 still hold it, so no
// other client finds a majority free, and a client needs N/2+1+f grants
// anyway. The price is availability: acquire and extend need N/2+1+f
// instances up and answering (Guarantees.Tolerates is (N−1)/2 − f), and
// two clients that split the instances between them both fail and retry
// more often. docs/redlock.md argues it and states its limits.

// checkFailovers refuses a Failovers that no N/2+1+f of the n instances
// can meet, or a negative one.
func checkFailovers(n, f int) error {
	switch q := n/2 + 1; {
	case f < 0:
		return fmt.Errorf("redlock: Failovers %d is negative: %w", f, lockswap.ErrInvalid)
	case q+f > n:
		return fmt.Errorf("redlock: Failovers %d needs %d grants (N/2+1+Failovers) of %d instances; at most %d is possible: %w",
			f, q+f, n, n-q, lockswap.ErrInvalid)
	}
	return nil
}

// failoverNote is the Guarantees note on failover for n masters with opts.
func failoverNote(n int, opts Options) string {
	q := n/2 + 1
	if f := opts.Failovers; f > 0 {
		return fmt.Sprintf("a lock needs %d of %d grants (a majority plus Failovers=%d), so exclusion survives up to %d of its granting masters failing over to replicas that never received it (or restarting without persistence) while it is valid; more can let a second client in; acquire and extend need %d masters up (docs/redlock.md#failover)",
			q+f, n, f, f, q+f)
	}
	return fmt.Sprintf("a lock may hold only a bare majority of grants (%d of %d): when one of those masters fails over to a replica that never received it, a second client can get a majority (set Failovers; docs/redlock.md#failover)", q, n)
}

// Grants returns how many instances granted l, a lock of a redlock Locker,
// in its acquisition or its last extension: those that said OK to the SET
// (or, after an extension, extended it), at least the Locker's Quorum. It
// unwraps Locks that wrap another (a method Unwrap() lockswap.Lock, as
// the otel package's do). Log it, or put it on a span: a lock with no
// grants to spare above a majority does not survive the failover of one
// of them unless Options.Failovers is set. ok is false for a lock of
// another backend.
func Grants(l lockswap.Lock) (n int, ok bool) {
	for {
		if d, ok := driver.Data[*rlock](l); ok {
			if d == nil {
				return 0, false
			}
			return int(d.grants.Load()), true
		}
		u, ok := l.(interface{ Unwrap() lockswap.Lock })
		if !ok {
			return 0, false
		}
		l = u.Unwrap()
	}
}
