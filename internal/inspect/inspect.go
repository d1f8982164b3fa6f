// Package inspect lists the lock keys under a prefix in one Redis: owner
// tokens of token locks, legacy SETNX timestamps and whether they have
// expired, and the keys' remaining TTL. `lockswap inspect` prints it; it is
// meant for migrations, to see which kind of client holds what.
package inspect

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockswap/lockswap/redisclient"
)

// Kind is what a lock key holds.
type Kind string

// The kinds of value Scan recognises.
const (
	KindToken  Kind = "token"  // a random owner token (singleredis, redlock, other SET NX PX clients)
	KindLegacy Kind = "legacy" // a Unix timestamp (legacy SETNX/GETSET clients, legacysetnx)
	KindFence  Kind = "fence"  // a singleredis fence counter
	KindOther  Kind = "other"  // not a lock value
)

// Entry is one key.
type Entry struct {
	Key   string
	Kind  Kind
	Value string
	// TTL is the key's remaining Redis TTL; negative when it has none.
	TTL time.Duration
	// Expiry is a legacy timestamp's time, and Expired whether it passed
	// (by now).
	Expiry  time.Time
	Expired bool
}

// Scan lists keys matching prefix* (at most limit of them), sorted by key.
func Scan(ctx context.Context, c redisclient.Client, prefix string, limit int, now time.Time) ([]Entry, error) {
	var out []Entry
	cursor := "0"
	pattern := escapeGlob(prefix) + "*"
	for {
		v, err := c.Do(ctx, "SCAN", cursor, "MATCH", pattern, "COUNT", 500)
		if err != nil {
			return nil, fmt.Errorf("inspect: SCAN on %s: %w", c, err)
		}
		arr, ok := v.([]any)
		if !ok || len(arr) != 2 {
			return nil, fmt.Errorf("inspect: unexpected SCAN reply %v", v)
		}
		cursor, _ = arr[0].(string)
		keys, _ := arr[1].([]any)
		for _, k := range keys {
			key, _ := k.(string)
			e, err := describe(ctx, c, key, now)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
			if limit > 0 && len(out) >= limit {
				cursor = "0"
				break
			}
		}
		if cursor == "0" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

func describe(ctx context.Context, c redisclient.Client, key string, now time.Time) (Entry, error) {
	e := Entry{Key: key}
	pttl, err := c.Do(ctx, "PTTL", key)
	if err != nil {
		return e, fmt.Errorf("inspect: PTTL %q: %w", key, err)
	}
	ms, _ := pttl.(int64)
	e.TTL = time.Duration(ms) * time.Millisecond
	val, found, err := c.Get(ctx, key)
	if err != nil && !redisclient.IsWrongType(err) {
		return e, fmt.Errorf("inspect: GET %q: %w", key, err)
	}
	if err != nil || !found {
		e.Kind = KindOther
		return e, nil
	}
	e.Value = val
	e.Kind = Classify(key, val)
	if e.Kind == KindLegacy {
		n, _ := strconv.ParseInt(val, 10, 64)
		e.Expiry = LegacyTime(n)
		e.Expired = !now.Before(e.Expiry)
	}
	return e, nil
}

// Classify tells a token from a legacy timestamp from a fence counter.
func Classify(key, val string) Kind {
	if strings.HasSuffix(key, ":fence") {
		if _, err := strconv.ParseUint(val, 10, 64); err == nil {
			return KindFence
		}
	}
	if n, err := strconv.ParseInt(val, 10, 64); err == nil && n > 1e9 {
		return KindLegacy
	}
	if len(val) >= 16 && isHex(val) {
		return KindToken
	}
	return KindOther
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// LegacyTime reads a legacy timestamp: seconds, or milliseconds when the
// number is too large to be seconds (after the year 5000).
func LegacyTime(n int64) time.Time {
	if n > 1e11 {
		return time.UnixMilli(n)
	}
	return time.Unix(n, 0)
}

// Print writes entries as an aligned table.
func Print(w io.Writer, entries []Entry, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tVALUE\tREDIS TTL\tLEGACY EXPIRY")
	for _, e := range entries {
		ttl := "none"
		if e.TTL >= 0 {
			ttl = e.TTL.Round(time.Millisecond).String()
		}
		exp := "-"
		if e.Kind == KindLegacy {
			if e.Expired {
				exp = fmt.Sprintf("expired %s ago", now.Sub(e.Expiry).Round(time.Second))
			} else {
				exp = fmt.Sprintf("live, %s left", e.Expiry.Sub(now).Round(time.Second))
			}
		}
		val := e.Value
		if len(val) > 40 {
			val = val[:37] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Key, e.Kind, val, ttl, exp)
	}
	return tw.Flush()
}
