// Package cleanup deletes the legacy SETNX/GETSET lock keys that nobody
// will take again: keys under a prefix whose timestamp passed longer ago
// than a margin the user sets, judged by the Redis server's clock. Old
// clients write these keys without a Redis expiry and free a dead lock only
// by taking it over, so a key whose last holder is gone stays forever
// (docs/keys.md). `lockswap cleanup` runs it, as the last step of a
// migration (docs/migration.md, step 5).
//
// It never deletes a live lock or one taken again after it was read: each
// key goes with a compare-and-delete on the exact value Find read (a lock
// taken again holds another timestamp), and only keys that hold a Unix
// timestamp in seconds or milliseconds and have no Redis expiry are
// candidates (never a token lock, a fence counter, a queue key, a number
// in neither unit, or a key that expires on its own, as lockswap's legacy
// keys with redis_expiry=true do). It refuses to plan on a prefix whose
// legacy keys mix both units (ErrMixedUnits). A key under the prefix that
// is no lock but holds a timestamp (a "last run" time, say) looks like a
// stale lock to it: the dry run lists what it would delete.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/redisclient"
)

// ErrMixedUnits is Find's error when the legacy keys under the prefix are
// written in seconds and in milliseconds: clients that disagree on the
// unit misread each other's locks, and which keys are stale depends on who
// is right. Find plans nothing; resolve the units first (inspect).
var ErrMixedUnits = errors.New("legacy timestamps in both seconds and milliseconds (MIXED units)")

// Candidate is a stale legacy key: its timestamp passed more than the
// plan's margin before the server's time.
type Candidate struct {
	Key   string
	Value string // the exact value read, which Delete compares
	Unit  inspect.Unit
	// Expiry is the time the timestamp stands for.
	Expiry time.Time
}

// Plan is what a cleanup deletes.
type Plan struct {
	// Now is the server's time (TIME) when the listing started; every
	// candidate passed OlderThan before it.
	Now time.Time
	// OlderThan is the margin.
	OlderThan time.Duration
	// Candidates are the stale legacy keys, sorted by key.
	Candidates []Candidate
	// Listed is the number of keys listed under the prefix, Legacy the
	// number of them that hold a legacy value (a number), candidates
	// included.
	Listed, Legacy int
}

// Kept is the number of legacy keys that are not candidates: live,
// expired less than OlderThan ago, with a Redis expiry, or a number in
// neither unit.
func (p Plan) Kept() int { return p.Legacy - len(p.Candidates) }

// Find lists the keys under prefix on c's server (inspect.Scan, every key)
// and returns the legacy keys whose timestamp passed more than olderThan
// before the server's time (TIME, read first: the listing may take a
// while, and the server's clock only moves on). A listing that fails
// (ctx ended, the server went away) plans nothing: its error says so.
func Find(ctx context.Context, c redisclient.Client, prefix string, olderThan time.Duration, progress func(listed, calls int)) (Plan, error) {
	if olderThan <= 0 {
		return Plan{}, fmt.Errorf("cleanup: the margin %v must be positive", olderThan)
	}
	now, err := c.Time(ctx)
	if err != nil {
		return Plan{}, fmt.Errorf("cleanup: TIME on %s: %w", c, err)
	}
	l, err := inspect.Scan(ctx, c, inspect.Query{Prefix: prefix, Now: now, Progress: progress})
	if err != nil {
		return Plan{}, fmt.Errorf("cleanup: nothing planned: %w", err)
	}
	p := Plan{Now: now, OlderThan: olderThan, Listed: len(l.Entries)}
	if s := inspect.Summarize(l.Entries); s.Seconds > 0 && s.Milliseconds > 0 {
		return Plan{}, fmt.Errorf("cleanup: %w under prefix %q: %d in seconds, %d in milliseconds; nothing planned (lockswap inspect lists them)", ErrMixedUnits, prefix, s.Seconds, s.Milliseconds)
	}
	for _, e := range l.Entries {
		if e.Kind != inspect.KindLegacy {
			continue
		}
		p.Legacy++
		if stale(e, now, olderThan) {
			p.Candidates = append(p.Candidates, Candidate{Key: e.Key, Value: e.Value, Unit: e.Unit, Expiry: e.Expiry})
		}
	}
	return p, nil
}

// stale reports whether e is a timestamp in seconds or milliseconds,
// without a Redis expiry, that passed more than olderThan before now.
func stale(e inspect.Entry, now time.Time, olderThan time.Duration) bool {
	if e.Unit != inspect.UnitSeconds && e.Unit != inspect.UnitMilliseconds || e.Expiry.IsZero() || e.TTL >= 0 {
		return false
	}
	return now.Sub(e.Expiry) > olderThan
}

// Result is what Delete did.
type Result struct {
	// Deleted is the number of candidates deleted.
	Deleted int
	// Changed are the candidates kept because their key no longer held
	// the value read (taken again, or deleted by someone else).
	Changed []string
}

// Delete deletes each candidate whose key still holds the exact value
// read, one compare-and-delete script call per key (the lock release
// script of the Redis backends), and calls progress, when set, after each.
// It stops at the first failed call (ctx ended, the server went away),
// returning what it did until then with the error.
func Delete(ctx context.Context, c redisclient.Client, cands []Candidate, progress func(done int)) (Result, error) {
	var r Result
	for i, cd := range cands {
		v, err := c.Run(ctx, redisscript.CompareAndDelete, []string{cd.Key}, cd.Value)
		if err != nil {
			return r, fmt.Errorf("cleanup: compare-and-delete of %q on %s (%d of %d stale keys deleted before it): %w", cd.Key, c, r.Deleted, len(cands), err)
		}
		switch n, _ := v.(int64); n {
		case 1:
			r.Deleted++
		case 0:
			r.Changed = append(r.Changed, cd.Key)
		default:
			return r, fmt.Errorf("cleanup: compare-and-delete of %q on %s: unexpected reply %v", cd.Key, c, v)
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	return r, nil
}

// PrintPlan writes the candidates as a table and a summary line.
func PrintPlan(w io.Writer, p Plan) error {
	if len(p.Candidates) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tVALUE\tUNIT\tLEGACY EXPIRY")
		for _, cd := range p.Candidates {
			fmt.Fprintf(tw, "%s\t%s\t%s\texpired %s ago\n", cd.Key, cd.Value, cd.Unit, p.Now.Sub(cd.Expiry).Round(time.Second))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d keys listed, %d legacy: %d stale (expired more than %v ago by the server's clock), %d kept (live, expired less than %v ago, expiring on their own, or not a timestamp in s or ms)\n",
		p.Listed, p.Legacy, len(p.Candidates), p.OlderThan, p.Kept(), p.OlderThan)
	return err
}

// PrintResult writes what Delete did.
func PrintResult(w io.Writer, p Plan, r Result) error {
	_, err := fmt.Fprintf(w, "deleted %d of %d stale keys; %d kept because they no longer held the value read (taken again or deleted meanwhile)\n",
		r.Deleted, len(p.Candidates), len(r.Changed))
	for _, k := range r.Changed {
		if err != nil {
			break
		}
		_, err = fmt.Fprintf(w, "kept: %s\n", k)
	}
	return err
}
