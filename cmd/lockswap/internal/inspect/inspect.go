// Package inspect lists the lock keys under a prefix in one Redis: owner
// tokens of token locks, counting semaphores, legacy SETNX timestamps, the unit they are written
// in and whether they have expired, who wrote them (an old client, whose
// keys have no Redis expiry, or lockswap with redis_expiry=true), and the
// keys' remaining TTL. `lockswap inspect` prints it; it is meant for
// migrations, to see which kind of client holds what, whether an old
// client is left, and which unit= a legacysetnx Locker sharing the keys
// must use (it has no default).
package inspect

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
)

// Kind is what a lock key holds.
type Kind string

// The kinds of value Scan recognises.
const (
	KindToken  Kind = "token"  // a random owner token (singleredis, redlock, other SET NX PX clients)
	KindLegacy Kind = "legacy" // a number: a Unix timestamp (legacy SETNX/GETSET clients, legacysetnx), see Unit
	KindFence  Kind = "fence"  // a singleredis fence counter
	// KindSemaphore: a singleredis counting semaphore (a hash with a limit
	// field, docs/keys.md); its Value is "limit N, H held".
	KindSemaphore Kind = "semaphore"
	// KindRWLock: a singleredis read-write lock (a hash of w, we,
	// r:<token> and q:<id> fields, docs/keys.md); its Value says which
	// holds are live ("write held", "N read held") and how many writers
	// wait.
	KindRWLock Kind = "rwlock"
	KindOther  Kind = "other" // not a lock value
)

// Unit is the unit a legacy value is written in.
type Unit string

// The units Scan reports for legacy keys.
const (
	UnitSeconds      Unit = "seconds"      // Unix seconds (about 10 digits): legacysetnx unit=s
	UnitMilliseconds Unit = "milliseconds" // Unix milliseconds (about 13 digits): legacysetnx unit=ms
	UnitUnknown      Unit = "unknown"      // a number in neither range (legacysetnx refuses it)
)

// Writer is who wrote a legacy timestamp, as far as the key's Redis
// expiry tells.
type Writer string

// The writers Scan reports for legacy timestamps in seconds or
// milliseconds.
const (
	// WriterOld: the key has no Redis expiry. Old SETNX/GETSET clients
	// write none (and their GETSET removes one), nor does a lockswap
	// Locker without redis_expiry=true (legacysetnx's default).
	WriterOld Writer = "old client"
	// WriterLockswap: the key has a Redis expiry, which lockswap sets with
	// redis_expiry=true (Options.SetRedisExpiry) on every write: a dual
	// or target-with-legacy_net client configured as docs/migration.md
	// says. An old client that sets an expiry of its own looks the same.
	WriterLockswap Writer = "lockswap"
)

// Entry is one key.
type Entry struct {
	Key   string
	Kind  Kind
	Value string
	// TTL is the key's remaining Redis TTL; negative when it has none.
	TTL time.Duration
	// Unit is the unit a legacy value is written in (see
	// legacysetnx.UnitOf); empty for other kinds.
	Unit Unit
	// Expiry is a legacy timestamp's time, and Expired whether it passed
	// (by now); zero and false when the unit is unknown.
	Expiry  time.Time
	Expired bool
	// Writer is who wrote a legacy timestamp in seconds or milliseconds
	// (by its Redis expiry); empty for other kinds and units.
	Writer Writer
}

// Query is what Scan lists.
type Query struct {
	// Prefix: Scan lists the keys that start with it (SCAN MATCH, with
	// the glob characters in Prefix escaped).
	Prefix string
	// Limit stops the listing at this many keys; 0 lists them all.
	Limit int
	// Now is the time legacy timestamps are compared with.
	Now time.Time
	// Progress, when set, is called after each key read and after each
	// SCAN call, with the keys listed so far and the SCAN calls made.
	Progress func(listed, calls int)
}

// Listing is what Scan found.
type Listing struct {
	// Entries are the keys listed, sorted by key.
	Entries []Entry
	// More reports that Scan stopped at Query.Limit before the end of the
	// keyspace: other keys may match, which Entries (and the summary)
	// do not cover.
	More bool
	// Incomplete reports that Scan stopped at a failure (its error):
	// Entries are the keys listed before it.
	Incomplete bool
}

// Scan lists the keys under q.Prefix, at most q.Limit of them, reading
// each one's value and TTL, in the order SCAN returns them (the hash
// table's, not the keys'); the Entries come back sorted by key. A key that
// SCAN returns twice (it may, while Redis resizes its table) is listed
// once; a key that expires or is deleted between SCAN and its reads is
// left out. When a request fails (ctx ended, the server went away), Scan
// returns the keys listed until then, marked Incomplete, with the error,
// which says, when there are some, that the listing is incomplete.
func Scan(ctx context.Context, c redisclient.Client, q Query) (l Listing, err error) {
	defer func() { sort.Slice(l.Entries, func(i, j int) bool { return l.Entries[i].Key < l.Entries[j].Key }) }()
	incomplete := func(err error) error {
		l.Incomplete = true
		if len(l.Entries) == 0 {
			return fmt.Errorf("inspect: %w", err)
		}
		return fmt.Errorf("inspect: listing incomplete (%d keys listed): %w", len(l.Entries), err)
	}
	full := func() bool { return q.Limit > 0 && len(l.Entries) >= q.Limit }
	progress := func(calls int) {
		if q.Progress != nil {
			q.Progress(len(l.Entries), calls)
		}
	}
	seen := map[string]bool{}
	cursor := "0"
	pattern := userservers.GlobEscape(q.Prefix) + "*"
	for calls := 1; ; calls++ {
		v, err := c.Do(ctx, "SCAN", cursor, "MATCH", pattern, "COUNT", 500)
		if err != nil {
			return l, incomplete(fmt.Errorf("SCAN on %s: %w", c, err))
		}
		arr, ok := v.([]any)
		if !ok || len(arr) != 2 {
			return l, incomplete(fmt.Errorf("unexpected SCAN reply %v", v))
		}
		cursor, _ = arr[0].(string)
		keys, _ := arr[1].([]any)
		for _, k := range keys {
			key, _ := k.(string)
			if seen[key] {
				continue
			}
			if full() {
				l.More = true // this key matches, and is not listed
				return l, nil
			}
			seen[key] = true
			e, gone, err := describe(ctx, c, key, q.Now)
			if err != nil {
				return l, incomplete(err)
			}
			if !gone {
				l.Entries = append(l.Entries, e)
			}
			progress(calls)
		}
		progress(calls)
		if cursor == "0" {
			return l, nil
		}
		if full() {
			// The rest of the keyspace is not scanned: it may hold more.
			l.More = true
			return l, nil
		}
	}
}

// readKey returns KEYS[1]'s type, its value when it is a string, and its
// PTTL, read at once: with separate reads an old client's GETSET between
// them could pair its value with the expiry lockswap had set, and pass an
// old client's lock for lockswap's. For a hash with a limit field from 1
// to lockswap.MaxPermits (a counting semaphore) the value is "<limit>
// <permits live>", counted by the server's clock; for a hash whose fields
// are a read-write lock's (w, we, r:<token>, q:<id>) it is "rw <write
// hold live: 0 or 1> <read holds live> <writers waiting>"; for another
// type, a hash with another limit (so that a huge one costs no long
// loop), another hash, or a hash the user may not read (HGETALL denied),
// it is "".
var readKey = redisclient.NewScript(`local t = redis.call('TYPE', KEYS[1])['ok']
local v = ''
if t == 'string' then v = redis.call('GET', KEYS[1]) end
if t == 'hash' then
  local all = redis.pcall('HGETALL', KEYS[1])
  if not all.err then
    local f = {}
    for i = 1, #all, 2 do f[all[i]] = all[i + 1] end
    local limit = f['limit']
    if limit and string.match(limit, '^[1-9]%d*$') and #limit <= 4 and tonumber(limit) <= 1024 then
      limit = tonumber(limit)
      local tm = redis.call('TIME')
      local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
      local held = 0
      for s = 0, limit - 1 do
        local e = tonumber(f['e' .. s])
        if f['t' .. s] and e and e > now then held = held + 1 end
      end
      v = limit .. ' ' .. held
    elseif #all > 0 then
      local tm = redis.call('TIME')
      local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
      local w, r, q = 0, 0, 0
      for i = 1, #all, 2 do
        local name, e = all[i], tonumber(all[i + 1])
        local kind = string.match(name, '^([rq]):%x+$')
        if name == 'we' then
          if e and e > now and f['w'] then w = 1 end
        elseif kind == 'r' then
          if e and e > now then r = r + 1 end
        elseif kind == 'q' then
          if e and e > now then q = q + 1 end
        elseif name ~= 'w' then
          w = -1
          break
        end
      end
      if w >= 0 then v = 'rw ' .. w .. ' ' .. r .. ' ' .. q end
    end
  end
end
return {t, v, redis.call('PTTL', KEYS[1])}`)

// describe reads key; gone reports that it no longer exists.
func describe(ctx context.Context, c redisclient.Client, key string, now time.Time) (e Entry, gone bool, err error) {
	e = Entry{Key: key}
	v, err := c.Run(ctx, readKey, []string{key})
	if err != nil {
		return e, false, fmt.Errorf("reading %q: %w", key, err)
	}
	arr, _ := v.([]any)
	if len(arr) != 3 {
		return e, false, fmt.Errorf("reading %q: unexpected reply %v", key, v)
	}
	typ, _ := arr[0].(string)
	val, _ := arr[1].(string)
	ms, _ := arr[2].(int64)
	switch {
	case typ == "none" || ms == -2:
		return e, true, nil // no such key (any more)
	case typ == "hash" && strings.HasPrefix(val, "rw "):
		var w, r, q int
		fmt.Sscanf(val, "rw %d %d %d", &w, &r, &q)
		e.Kind, e.TTL = KindRWLock, time.Duration(ms)*time.Millisecond
		e.Value = fmt.Sprintf("%d read held", r)
		if w == 1 {
			e.Value = "write held"
		}
		if q > 0 {
			e.Value += fmt.Sprintf(", %d writers waiting", q)
		}
		return e, false, nil
	case typ == "hash" && val != "":
		limit, held, _ := strings.Cut(val, " ")
		e.Kind, e.TTL = KindSemaphore, time.Duration(ms)*time.Millisecond
		e.Value = "limit " + limit + ", " + held + " held"
		return e, false, nil
	case typ != "string":
		e.Kind, e.TTL = KindOther, time.Duration(ms)*time.Millisecond
		return e, false, nil
	}
	e.TTL = time.Duration(ms) * time.Millisecond
	e.Value = val
	e.Kind = Classify(key, val)
	if e.Kind == KindLegacy {
		e.Unit = UnitUnknown
		if u, ok := legacysetnx.UnitOf(val); ok {
			e.Unit = unitOf(u)
			e.Expiry = LegacyTime(val, u)
			e.Expired = !now.Before(e.Expiry)
			e.Writer = WriterLockswap
			if e.TTL < 0 {
				e.Writer = WriterOld
			}
		}
	}
	return e, false, nil
}

func unitOf(u legacysetnx.Unit) Unit {
	if u == legacysetnx.Milliseconds {
		return UnitMilliseconds
	}
	return UnitSeconds
}

// Classify tells a token from a legacy timestamp from a fence counter. A
// legacy value is a timestamp in seconds or milliseconds
// (legacysetnx.UnitOf), or another plain number of at most 15 digits,
// whose unit is unknown.
func Classify(key, val string) Kind {
	if strings.HasSuffix(key, ":fence") {
		if _, err := strconv.ParseUint(val, 10, 64); err == nil {
			return KindFence
		}
	}
	if _, ok := legacysetnx.UnitOf(val); ok {
		return KindLegacy
	}
	if len(val) >= 16 && isHex(val) {
		return KindToken
	}
	if isNumber(val) {
		return KindLegacy
	}
	return KindOther
}

// isNumber matches -?[0-9]{1,15}(\.[0-9]+)?: shorter than a token.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasDot := strings.Cut(s, ".")
	if len(intPart) == 0 || len(intPart) > 15 || (hasDot && frac == "") {
		return false
	}
	for _, r := range intPart + frac {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// LegacyTime reads a legacy timestamp val (digits, with an optional
// decimal fraction) in unit u.
func LegacyTime(val string, u legacysetnx.Unit) time.Time {
	f, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	if u == legacysetnx.Milliseconds {
		return time.UnixMilli(int64(sec)).Add(time.Duration(frac * float64(time.Millisecond)))
	}
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Summary counts the legacy keys per unit and says which unit= a
// legacysetnx Locker sharing these keys needs.
type Summary struct {
	Seconds, Milliseconds, Unknown int
	// LiveOld and LiveLockswap count the live legacy locks (timestamps
	// not yet passed) per Writer.
	LiveOld, LiveLockswap int
}

// Summarize counts the legacy entries per unit, and the live ones per
// writer.
func Summarize(entries []Entry) Summary {
	var s Summary
	for _, e := range entries {
		if e.Kind != KindLegacy {
			continue
		}
		if !e.Expired {
			switch e.Writer {
			case WriterOld:
				s.LiveOld++
			case WriterLockswap:
				s.LiveLockswap++
			}
		}
		switch e.Unit {
		case UnitSeconds:
			s.Seconds++
		case UnitMilliseconds:
			s.Milliseconds++
		default:
			s.Unknown++
		}
	}
	return s
}

// Unit is the unit the legacy keys agree on: UnitSeconds or
// UnitMilliseconds when all timestamps seen are in it, UnitUnknown when
// there are none or both units are seen.
func (s Summary) Unit() Unit {
	switch {
	case s.Seconds > 0 && s.Milliseconds == 0:
		return UnitSeconds
	case s.Milliseconds > 0 && s.Seconds == 0:
		return UnitMilliseconds
	}
	return UnitUnknown
}

// String is the summary line `lockswap inspect` prints.
func (s Summary) String() string {
	counts := fmt.Sprintf("legacy timestamps: %d in seconds, %d in milliseconds, %d unknown", s.Seconds, s.Milliseconds, s.Unknown)
	switch {
	case s.Seconds > 0 && s.Milliseconds > 0:
		return counts + ": units: MIXED: the clients disagree on the unit and misread each other's locks; find which client writes which before sharing these keys with legacysetnx"
	case s.Seconds > 0:
		return counts + ": unit: seconds: a legacysetnx Locker sharing these keys needs unit=s"
	case s.Milliseconds > 0:
		return counts + ": unit: milliseconds: a legacysetnx Locker sharing these keys needs unit=ms"
	}
	return counts + ": unit: unknown: no timestamp seen; read the old clients' configuration or code (seconds: ~10 digits, milliseconds: ~13)"
}

// Writers is the line `lockswap inspect` prints about who holds the live
// legacy locks.
func (s Summary) Writers() string {
	return fmt.Sprintf("live legacy locks: %d by old clients (no Redis expiry), %d by lockswap (a Redis expiry: redis_expiry=true)", s.LiveOld, s.LiveLockswap)
}

// Print writes the listing as an aligned table, with the unit of each
// legacy timestamp, followed by the Summary line (the unit the legacy keys
// are written in) and, when the listing stopped at its limit or at a
// failure, a line saying so and that other keys may match.
func Print(w io.Writer, l Listing, now time.Time) error {
	entries := l.Entries
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tVALUE\tREDIS TTL\tUNIT\tLEGACY EXPIRY\tWRITER")
	for _, e := range entries {
		ttl := "none"
		if e.TTL >= 0 {
			ttl = e.TTL.Round(time.Millisecond).String()
		}
		exp, unit, writer := "-", "-", "-"
		if e.Writer != "" {
			writer = string(e.Writer)
		}
		if e.Kind == KindLegacy {
			unit = string(e.Unit)
			if e.Unit == UnitUnknown {
				exp = "not a timestamp in s or ms"
			} else if e.Expired {
				exp = fmt.Sprintf("expired %s ago", now.Sub(e.Expiry).Round(time.Second))
			} else {
				exp = fmt.Sprintf("live, %s left", e.Expiry.Sub(now).Round(time.Second))
			}
		}
		val := e.Value
		if len(val) > 40 {
			val = val[:37] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Key, e.Kind, val, ttl, unit, exp, writer)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := Summarize(entries)
	if _, err := fmt.Fprintf(w, "%s\n%s\n", s, s.Writers()); err != nil {
		return err
	}
	switch {
	case l.Incomplete:
		_, err := fmt.Fprintf(w, "listing incomplete: it stopped after %d keys (the cause is on stderr); others may match, which this table and its summary do not cover\n", len(entries))
		return err
	case l.More:
		_, err := fmt.Fprintf(w, "listed %d of the matching keys (--limit), in SCAN order, not by name: others may match, which this table and its summary do not cover\n", len(entries))
		return err
	}
	return nil
}

// DefaultPort is the port Addr adds to an address without one: Redis's.
const DefaultPort = "6379"

// Addr returns addr with DefaultPort added when it has no port: "host"
// and "[::1]" become "host:6379" and "[::1]:6379"; "host:6380" is kept.
// A bare IPv6 address ("::1") is taken as a host.
func Addr(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	host := strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	return net.JoinHostPort(host, DefaultPort)
}
