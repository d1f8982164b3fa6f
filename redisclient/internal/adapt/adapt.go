// Package adapt holds what the Redis client adapters (redisclient/goredis,
// redisclient/redigo) share but do not export.
package adapt

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockswap/lockswap/redisclient"
)

// Millis is ttl in whole milliseconds, at least 1 (PX 0 is an error).
func Millis(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return ms
}

// ParseTime turns a TIME reply [seconds, microseconds] into a time.Time.
func ParseTime(v any) (time.Time, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return time.Time{}, fmt.Errorf("redis TIME: unexpected reply %v", v)
	}
	var parts [2]int64
	for i, p := range arr {
		s, ok := p.(string)
		if !ok {
			return time.Time{}, fmt.Errorf("redis TIME: unexpected reply %v", v)
		}
		if _, err := fmt.Sscan(s, &parts[i]); err != nil {
			return time.Time{}, fmt.Errorf("redis TIME: %w", err)
		}
	}
	return time.Unix(parts[0], parts[1]*1000), nil
}

// IsNoScript reports whether err is a NOSCRIPT reply: the server does not
// know the script's SHA, so the adapter loads it with EVAL.
func IsNoScript(err error) bool {
	var re *redisclient.ReplyError
	return errors.As(err, &re) && strings.HasPrefix(re.Msg, "NOSCRIPT")
}
