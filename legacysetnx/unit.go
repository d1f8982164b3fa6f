package legacysetnx

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/lockstate"
)

// Unit is the resolution of the stored timestamps. It has no default: the
// zero Unit is not a unit, and New refuses it. It must be the unit the old
// clients sharing the keys write, which only their configuration (or a look
// at a live key, see [UnitHelp]) can tell: read in the wrong unit, a lock
// written in seconds looks expired since 1970 to a client in milliseconds,
// which then takes it over while it is held.
type Unit int

const (
	// Seconds: Unix seconds, the form the Redis SETNX documentation uses
	// (a value of 10 digits today, such as 1700000000).
	Seconds Unit = iota + 1
	// Milliseconds: Unix milliseconds, the form of old clients such as npm
	// redis-lock (13 digits today, such as 1700000000000).
	Milliseconds
)

// UnitHelp says how to choose the unit; the errors for a missing unit
// include it.
const UnitHelp = "unit=s if the old clients write Unix seconds (about 10 digits, such as 1700000000), " +
	"unit=ms if they write Unix milliseconds (about 13 digits, such as 1700000000000); " +
	"to find out, run `lockswap inspect --redis host:port --prefix lock.` (it reports the unit of the existing keys) " +
	"or GET a live lock key written by an old client. There is no default: in the wrong unit, old clients misread " +
	"lockswap's locks, as long expired (and take them over while they are held) or as held for millennia"

// String returns "s" or "ms", the spelling of the URL parameter unit=, and
// "unset" for the zero Unit.
func (u Unit) String() string {
	switch u {
	case Seconds:
		return "s"
	case Milliseconds:
		return "ms"
	case 0:
		return "unset"
	}
	return fmt.Sprintf("Unit(%d)", int(u))
}

// Duration returns the length of one unit (time.Second or
// time.Millisecond), or 0 for a Unit that is not Seconds or Milliseconds.
func (u Unit) Duration() time.Duration {
	switch u {
	case Seconds:
		return time.Second
	case Milliseconds:
		return time.Millisecond
	}
	return 0
}

func (u Unit) valid() bool { return u == Seconds || u == Milliseconds }

// name is the unit's name in messages.
func (u Unit) name() string {
	if u == Milliseconds {
		return "milliseconds"
	}
	return "seconds"
}

// bounds returns the range [lo, hi) of numbers accepted as timestamps in u.
func (u Unit) bounds() (lo, hi float64) {
	if u == Milliseconds {
		return MinMillis, MaxMillis
	}
	return MinSeconds, MaxSeconds
}

// ParseUnit parses a unit=: "s" (also "sec", "second", "seconds") or "ms"
// (also "milli", "millis", "millisecond", "milliseconds"), in any case. It
// is the one place that decides which spellings are units; package backend
// uses it to validate URLs and JSON configurations. An empty string is an
// error: the unit has no default (see [UnitHelp]). Errors match
// lockswap.ErrInvalid.
func ParseUnit(s string) (Unit, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "s", "sec", "second", "seconds":
		return Seconds, nil
	case "ms", "milli", "millis", "millisecond", "milliseconds":
		return Milliseconds, nil
	case "":
		return 0, fmt.Errorf("legacysetnx: the timestamp unit is required (unit=s or unit=ms): %s: %w", UnitHelp, lockswap.ErrInvalid)
	}
	return 0, fmt.Errorf("legacysetnx: unknown timestamp unit %s: want s (seconds) or ms (milliseconds): %w", lockstate.QuoteKey(s), lockswap.ErrInvalid)
}

// TTLRange returns the TTLs a Locker in unit u accepts: from the larger of
// lockswap.MinTTL and one unit, to lockswap.MaxTTL. The stored timestamp
// cannot say less than one unit: in seconds, a TTL under a second would be
// written as a whole second or two that the old clients honour, while the
// holder's Deadline and renewals follow the shorter TTL, so it is refused
// rather than rounded. Within the range the validity after the drift
// allowance (lockstate.Drift) stays positive (988 ms for 1 s, 7.9 ms for
// 10 ms) and the timestamps stay far inside the unit's range
// (MaxSeconds, MaxMillis). A Unit that is not Seconds or Milliseconds
// returns lockswap's own range.
func (u Unit) TTLRange() (min, max time.Duration) {
	min, max = lockswap.MinTTL, lockswap.MaxTTL
	if d := u.Duration(); d > min {
		min = d
	}
	return min, max
}

// ValidateTTL checks that ttl is within u.TTLRange(). The error matches
// lockswap.ErrInvalid and says which range applies.
func (u Unit) ValidateTTL(ttl time.Duration) error {
	if err := u.checkTTL(ttl); err != nil {
		return fmt.Errorf("legacysetnx: %w", err)
	}
	return nil
}

// checkTTL is ValidateTTL without the package prefix.
func (u Unit) checkTTL(ttl time.Duration) error {
	if !u.valid() {
		return fmt.Errorf("the timestamp unit is required (Seconds or Milliseconds): %s: %w", UnitHelp, lockswap.ErrInvalid)
	}
	if err := acquire.ValidateTTL(ttl); err != nil {
		return err
	}
	if min, max := u.TTLRange(); ttl < min || ttl > max {
		return fmt.Errorf("ttl %v is outside %v..%v, the range of unit=%s (a timestamp in %s cannot hold less than %v): %w",
			ttl, min, max, u, u.name(), u.Duration(), lockswap.ErrInvalid)
	}
	return nil
}

// UnitOf reports the unit a stored legacy value is plainly written in: a
// decimal number in the range of Seconds (MinSeconds..MaxSeconds) or of
// Milliseconds (MinMillis..MaxMillis). ok is false for anything else (not a
// number, negative, too small or too large for either unit). lockswap
// inspect uses it to report the unit the old clients write.
func UnitOf(value string) (u Unit, ok bool) {
	if !isDecimal(value) {
		return 0, false
	}
	n, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return 0, false
	}
	for _, u := range []Unit{Seconds, Milliseconds} {
		if lo, hi := u.bounds(); n >= lo && n < hi {
			return u, true
		}
	}
	return 0, false
}

// The ranges of numbers accepted as timestamps. A number outside the range
// of the configured unit is refused with lockswap.ErrInvalid rather than
// interpreted: read with the wrong unit, a live lock in seconds would look
// expired to a client in milliseconds, and be taken over.
const (
	// MinSeconds and MaxSeconds bound a timestamp in seconds (2001 to the
	// year 5138).
	MinSeconds = 1e9
	MaxSeconds = 1e11
	// MinMillis and MaxMillis bound a timestamp in milliseconds (1973 to
	// the year 5138).
	MinMillis = 1e11
	MaxMillis = 1e14
)

// unitConst is the Go name of u, for messages.
func unitConst(u Unit) string {
	if u == Milliseconds {
		return "legacysetnx.Milliseconds"
	}
	return "legacysetnx.Seconds"
}

// isDecimal matches ^[0-9]+(\.[0-9]+)?$.
func isDecimal(s string) bool {
	intPart, frac, hasDot := strings.Cut(s, ".")
	digits := func(p string) bool {
		if p == "" {
			return false
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return false
			}
		}
		return true
	}
	return digits(intPart) && (!hasDot || digits(frac))
}
