// Package adapt holds what the Redis client adapters (redisclient/goredis,
// redisclient/redigo, redisclient/rueidis) share but do not export.
package adapt

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
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

// Addr normalizes a server address and database into the form of
// redisclient.Client.Addr, "host:port/db": the host in lower case, an IP
// address in canonical form. It returns "" when hostport is not host:port.
func Addr(hostport string, db int) string {
	n := HostPort(hostport)
	if n == "" || db < 0 {
		return ""
	}
	return fmt.Sprintf("%s/%d", n, db)
}

// HostPort normalizes host:port as Addr does, or returns "".
func HostPort(hostport string) string {
	host, port, err := net.SplitHostPort(strings.TrimSpace(hostport))
	if err != nil || host == "" {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(p))
}

// ParseAddr reads "host:port" or "host:port/db" and returns its Addr form,
// or "" when s is not an address (a display name).
func ParseAddr(s string) string {
	hp, dbs, hasDB := strings.Cut(s, "/")
	db := 0
	if hasDB {
		var err error
		if db, err = strconv.Atoi(dbs); err != nil {
			return ""
		}
	}
	return Addr(hp, db)
}

// Detach returns a copy of args, each []byte element copied too, for a
// client that may still read a command's arguments after the call that
// sent it has returned on its context (from a goroutine of its own): the
// caller may then reuse its slices and buffers at once. It returns nil for
// no args.
func Detach(args []any) []any {
	if len(args) == 0 {
		return nil
	}
	return AppendDetached(make([]any, 0, len(args)), args)
}

// AppendDetached appends args to out as [Detach] copies them.
func AppendDetached(out, args []any) []any {
	for _, a := range args {
		if b, ok := a.([]byte); ok {
			a = bytes.Clone(b)
		}
		out = append(out, a)
	}
	return out
}
