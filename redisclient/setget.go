package redisclient

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
)

// MsgSetGetFallback is the message of the record singleredis and redlock
// write to their Options.Logger, at level Info, once per server and
// Locker, when the server rejects SET NX PX GET (Redis before 7.0) and the
// Locker falls back for good to SET NX PX: a contended first attempt then
// costs a TYPE request more. Its attributes are "server" (the client and
// address, as Client.String gives them: no credentials) and "reason".
const MsgSetGetFallback = "fallback taken: SET NX PX without GET"

// setGetFallbackReason is the reason attribute of MsgSetGetFallback.
const setGetFallbackReason = "the server rejects SET with both NX and GET (Redis before 7.0): attempts use SET NX PX, and a contended first attempt adds a TYPE request"

// LogSetGetFallback writes MsgSetGetFallback about c's server to l; a nil
// l writes nothing. The caller writes it once per server.
func LogSetGetFallback(l *slog.Logger, c Client) {
	if l == nil {
		return
	}
	l.LogAttrs(context.Background(), slog.LevelInfo, MsgSetGetFallback,
		slog.String("server", c.String()),
		slog.String("reason", setGetFallbackReason))
}

// SetNXPXGet runs SET key value NX PX ttl GET: one request that sets key
// when it is absent and otherwise leaves it as it is. It reports whether it
// set the key. A key that holds another Redis type than a string is refused
// by the server with a WRONGTYPE reply ([IsWrongType]) and left untouched,
// so a contended attempt learns in the same round trip whether what holds
// the key is a lock at all. The key it writes is the same plain string with
// a TTL as SET NX PX writes.
//
// Redis before 7.0 rejects NX together with GET as a syntax error, having
// run nothing: [IsSyntaxError] accepts that error, and the caller falls
// back to [Client.SetNXPX].
func SetNXPXGet(ctx context.Context, c Client, key, value string, ttl time.Duration) (bool, error) {
	if sg, ok := c.(SetGetter); ok {
		return sg.SetNXPXGet(ctx, key, value, ttl)
	}
	var a SetGetArgs
	a.Fill(key, value, TTLArg(ttl))
	return a.Run(ctx, c)
}

// SetGetter is implemented by adapters that run [SetNXPXGet] from its
// arguments as they are, without boxing them into a generic command's
// argument list (an allocation each). The rueidis and go-redis adapters
// implement it (go-redis's reads the reply unparsed, see its package).
type SetGetter interface {
	// SetNXPXGet runs SET key value NX PX ttl GET and reports whether it
	// set the key, as [SetNXPXGet] describes.
	SetNXPXGet(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
}

// SetGetArgs are the arguments of one SET key value NX PX ms GET
// ([SetNXPXGet]), for a caller that keeps them (in a value it allocates
// anyway) to spare the allocation of the argument list per request.
type SetGetArgs [7]any

// Fill sets the arguments: key and value (strings), and ms, the TTL in
// milliseconds as [TTLArg] gives it.
func (a *SetGetArgs) Fill(key, value, ms any) {
	*a = SetGetArgs{"SET", key, value, "NX", "PX", ms, "GET"}
}

// Run runs the command on c, as [SetNXPXGet] does: it reports whether it
// set the key.
func (a *SetGetArgs) Run(ctx context.Context, c Client) (bool, error) {
	v, err := c.Do(ctx, a[:]...)
	if err != nil {
		return false, err
	}
	// nil: the key was absent and is now set; a string: the value of
	// whoever holds it.
	return v == nil, nil
}

// TTLArg returns ttl in whole milliseconds (at least 1) as a command
// argument (an int64).
func TTLArg(ttl time.Duration) any {
	return max(ttl.Milliseconds(), 1)
}

// IsSyntaxError reports whether err is Redis's "ERR syntax error" reply: the
// server did not understand the command's options and ran nothing.
func IsSyntaxError(err error) bool {
	if err == nil {
		return false
	}
	var re *ReplyError
	return errors.As(err, &re) && strings.HasPrefix(re.Msg, "ERR syntax error")
}
