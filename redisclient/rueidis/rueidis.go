// Package rueidis adapts rueidis clients (github.com/redis/rueidis) to
// [redisclient.Client], so that lockswap's Redis backends can use them. A
// program that imports it links rueidis and neither go-redis nor redigo.
//
// rueidis pipelines automatically: the commands of concurrent callers on
// one connection share its writes and reads, so many goroutines taking
// locks at once need fewer round trips and system calls than with one
// connection per request. The adapters implement [redisclient.Grouper]:
// their Grouped form, which redlock uses, goes further (group commit: the
// commands callers send while one is in flight wait, and go together once
// it returns), and, for a client of one server, implements
// [redisclient.Splitter], so that redlock hands its commands to every
// instance from the caller's goroutine.
//
// Every command is bounded by its context: rueidis returns when the
// context ends or its deadline passes, and the command's outcome is then
// unknown (a transport error, see [redisclient.IsTransport]).
//
// Make the client with [NewClient], which sets what follows and lets the
// adapter send a request with a deadline without handing it to another
// goroutine;
// or give [New] a client made with ClientOption.AlwaysPipelining set, as
// client=rueidis URLs make it. Otherwise rueidis runs a request that is
// alone on its connection by itself, with the context's deadline on the
// socket, and when that deadline passes closes the connection under the
// requests other goroutines have sent on it meanwhile: one caller's
// timeout fails the others. With AlwaysPipelining every request goes
// through the connection's writer, and a request whose context ends gives
// up on its reply alone. Scripts go
// by EVALSHA, falling back to EVAL once when the server answers NOSCRIPT.
package rueidis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/adapt"
)

type adapter struct {
	c    rueidis.Client
	name string
	addr string // Addr; "" when unknown
	// grouped: concurrent commands go in batches (group.go); see Grouped.
	grouped bool
	// pipelined: c was made with ClientOption.AlwaysPipelining (by Dial
	// or NewClient, of one server),
	// so rueidis watches a command's cancellation once its connection is
	// up (see unwatched).
	pipelined bool
	// rising counts the client's connections that are coming up (dialed,
	// their server not heard from yet), when the dialer counts them (Dial,
	// NewClient); shared by the adapter's Grouped form.
	rising *atomic.Int32
	group  group
}

// New adapts a rueidis client. rueidis does not tell the database a client
// selects, so its address is unknown ([redisclient.Client.Addr] is ""):
// give it with [NewNamed] where that matters. It returns nil for a nil
// client, which the backends reject with lockswap.ErrInvalid. Make c with
// ClientOption.AlwaysPipelining set (see the package doc): without it one
// caller's deadline can close the connection under the other callers. As
// New cannot tell how c was made, its adapter hands every command under a
// context that can be cancelled to another goroutine (one of the workers
// the adapters keep) and returns at the cancellation: a command rueidis
// runs by itself watches its context's deadline only.
func New(c rueidis.Client) redisclient.Client {
	if redisclient.IsNil(c) {
		return nil
	}
	return &adapter{c: c, name: "rueidis client", rising: new(atomic.Int32)}
}

// NewNamed is [New] with the address the client reaches, "host:port" or
// "host:port/db" (database 0 when not given). It names the client in
// messages and is its identity ([redisclient.Client.Addr]), by which
// redlock refuses the same master twice and migrate refuses one Redis key
// for both locks. A name that is not an address leaves the address
// unknown. The name must not contain a password.
func NewNamed(c rueidis.Client, name string) redisclient.Client {
	if redisclient.IsNil(c) {
		return nil
	}
	return &adapter{c: c, name: "rueidis " + name, addr: adapt.ParseAddr(name), rising: new(atomic.Int32)}
}

// Grouped returns an adapter of the same client whose concurrent commands
// go in batches, one at a time (group commit): a command sent while
// another is in flight waits for it, with the other commands that arrive
// meanwhile, and they go together as one DoMulti. A command sent alone
// goes at once. Each caller still returns by its own context. The grouped
// adapter also implements [redisclient.Splitter] (split.go). A cluster
// client's adapter is returned as it is. It implements
// [redisclient.Grouper]; redlock uses it for each instance.
func (a *adapter) Grouped() redisclient.Client {
	if a.c.Mode() == rueidis.ClientModeCluster {
		return a
	}
	return splitter{&adapter{c: a.c, name: a.name, addr: a.addr, grouped: true, pipelined: a.pipelined, rising: a.rising}}
}

func (a *adapter) String() string { return a.name }

// Addr implements [redisclient.Client]: the address given to NewNamed, or
// "" when unknown.
func (a *adapter) Addr() string { return a.addr }

// replyErr turns a rueidis error reply into a [redisclient.ReplyError];
// other errors (connection, timeout, context) pass as they are.
func replyErr(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return &redisclient.ReplyError{Msg: withCode(re.Error())}
	}
	return err
}

// withCode returns an error reply's message as the server sent it: rueidis
// drops the generic code "ERR " (and keeps the others, WRONGTYPE,
// NOSCRIPT, ...), which the error classes of package redisclient read. It
// copies the message, which may share rueidis's read buffer.
func withCode(msg string) string {
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || strings.ToUpper(code) != code || strings.ContainsFunc(code, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		return "ERR " + msg
	}
	return strings.Clone(msg)
}

// result returns r's reply normalised like [redisclient.Client.Do]: a nil
// reply as nil, RESP3 replies as RESP2 gives them (a boolean true as 1 and
// false as nil, a map as an array of key, value pairs, sorted by key), an
// error reply as a ReplyError.
func result(r rueidis.RedisResult) (any, error) {
	v, err := r.ToAny()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, replyErr(err)
	}
	return adapt.Normalize(v, func(err error) any { return replyErr(err) }), nil
}

// do runs cmd, bounded by ctx.
func (a *adapter) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	r := a.do(ctx, a.c.B().Set().Key(key).Value(value).Nx().PxMilliseconds(adapt.Millis(ttl)).Build())
	err := r.Error()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return err == nil, replyErr(err)
}

// SetNXPXGet implements [redisclient.SetGetter]: SET key value NX PX ttl
// GET, built from its arguments as they are.
func (a *adapter) SetNXPXGet(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	_, held, err := str(a.do(ctx, a.setGet(key, value, adapt.Millis(ttl))))
	return err == nil && !held, err
}

// setGet builds SET key value NX GET PX ms.
func (a *adapter) setGet(key, value string, ms int64) rueidis.Completed {
	return a.c.B().Set().Key(key).Value(value).Nx().Get().PxMilliseconds(ms).Build()
}

func (a *adapter) SetNX(ctx context.Context, key, value string) (bool, error) {
	n, err := a.do(ctx, a.c.B().Setnx().Key(key).Value(value).Build()).AsInt64()
	return n == 1, replyErr(err)
}

// str returns r's string reply, and false for a nil reply.
func str(r rueidis.RedisResult) (string, bool, error) {
	v, err := r.ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	return v, err == nil, replyErr(err)
}

func (a *adapter) Get(ctx context.Context, key string) (string, bool, error) {
	return str(a.do(ctx, a.c.B().Get().Key(key).Build()))
}

func (a *adapter) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	return str(a.do(ctx, a.c.B().Getset().Key(key).Value(value).Build()))
}

func (a *adapter) Del(ctx context.Context, keys ...string) (int64, error) {
	cmd, err := a.del(keys)
	if err != nil {
		return 0, err
	}
	n, err := a.do(ctx, cmd).AsInt64()
	return n, replyErr(err)
}

func (a *adapter) Time(ctx context.Context) (time.Time, error) {
	v, err := result(a.do(ctx, a.c.B().Time().Build()))
	if err != nil {
		return time.Time{}, err
	}
	return adapt.ParseTime(v)
}

func (a *adapter) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	// A lock's scripts take a few arguments: build them on the stack.
	var buf [4]string
	argv := appendStrs(buf[:0], args)
	cmd, err := a.script(s.SHA(), "", keys, argv)
	if err != nil {
		return nil, err
	}
	v, err := result(a.do(ctx, cmd))
	if err != nil && adapt.IsNoScript(err) {
		if cmd, err = a.script("", s.Source(), keys, argv); err != nil {
			return nil, err
		}
		v, err = result(a.do(ctx, cmd))
	}
	return v, err
}

// script builds EVALSHA sha (or, with sha empty, EVAL source) over keys
// and argv. In cluster mode rueidis's builder panics on keys of two hash
// slots before anything is sent; that is returned as the CROSSSLOT reply
// Redis Cluster gives (a permanent error: no wait puts the keys in one
// slot), not as a panic in the caller's goroutine.
func (a *adapter) script(sha, source string, keys, argv []string) (cmd rueidis.Completed, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = crossSlot(r)
		}
	}()
	n := int64(len(keys))
	if sha != "" {
		return a.c.B().Evalsha().Sha1(sha).Numkeys(n).Key(keys...).Arg(argv...).Build(), nil
	}
	return a.c.B().Eval().Script(source).Numkeys(n).Key(keys...).Arg(argv...).Build(), nil
}

// crossSlot turns the panic of rueidis's cluster builder over keys of two
// hash slots into the CROSSSLOT reply error; any other panic goes on.
func crossSlot(r any) error {
	if msg := fmt.Sprint(r); strings.Contains(msg, "different key slots") {
		return &redisclient.ReplyError{Msg: "CROSSSLOT Keys in request don't hash to the same slot (rueidis: " + msg + ")"}
	}
	panic(r)
}

// del builds DEL keys; keys of two hash slots in cluster mode are the
// CROSSSLOT reply error (see script).
func (a *adapter) del(keys []string) (cmd rueidis.Completed, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = crossSlot(r)
		}
	}()
	return a.c.B().Del().Key(keys...).Build(), nil
}

// keyless are the commands Do runs whose first argument is not a key.
var keyless = map[string]bool{
	"INFO": true, "TIME": true, "PING": true, "SCAN": true, "DBSIZE": true, "SCRIPT": true,
	"CLIENT": true, "CONFIG": true, "FLUSHALL": true, "FLUSHDB": true, "DEBUG": true,
	"EVAL": true, "EVALSHA": true, "CLUSTER": true, "ROLE": true, "HELLO": true,
}

// Do runs any command. Its first argument after the command's name is
// sent as a key (so that a cluster client routes it), except for the
// commands without one (INFO, SCAN, PING, ...).
func (a *adapter) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("redisclient/rueidis: Do without a command")
	}
	if key, value, ms, ok := setNXPXGet(args); ok {
		// A lock's acquire (redisclient.SetNXPXGet), built without the
		// generic path's conversions.
		v, ok, err := str(a.do(ctx, a.setGet(key, value, ms)))
		if err != nil || !ok {
			return nil, err
		}
		return v, nil
	}
	return result(a.do(ctx, a.arbitrary(args)))
}

// arbitrary builds any command (args: its name and arguments) as Do sends
// it: the first argument after the name as a key, except for keyless
// commands.
func (a *adapter) arbitrary(args []any) rueidis.Completed {
	argv := strs(args)
	cmd := a.c.B().Arbitrary(argv[0])
	if len(argv) > 1 && !keyless[strings.ToUpper(argv[0])] {
		cmd = cmd.Keys(argv[1]).Args(argv[2:]...)
	} else {
		cmd = cmd.Args(argv[1:]...)
	}
	return cmd.Build()
}

// setNXPXGet reports whether args are SET key value NX PX ms GET, with
// string key and value and an int64 ms, and returns those.
func setNXPXGet(args []any) (key, value string, ms int64, ok bool) {
	if len(args) != 7 {
		return "", "", 0, false
	}
	for _, w := range [...]struct {
		i    int
		word string
	}{{0, "SET"}, {3, "NX"}, {4, "PX"}, {6, "GET"}} {
		if s, isStr := args[w.i].(string); !isStr || !strings.EqualFold(s, w.word) {
			return "", "", 0, false
		}
	}
	key, ok1 := args[1].(string)
	value, ok2 := args[2].(string)
	ms, ok3 := args[5].(int64)
	return key, value, ms, ok1 && ok2 && ok3
}

// strs turns command arguments into the strings rueidis sends.
func strs(args []any) []string { return appendStrs(make([]string, 0, len(args)), args) }

// appendStrs appends args, as the strings rueidis sends, to out.
func appendStrs(out []string, args []any) []string {
	for _, v := range args {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		case int64:
			s = strconv.FormatInt(x, 10)
		case int:
			s = strconv.Itoa(x)
		case float64:
			s = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			s = fmt.Sprint(x)
		}
		out = append(out, s)
	}
	return out
}

// CostNote implements [redisclient.CostNoter]: an adapter from [New] or
// [NewNamed] cannot tell that its client pipelines always, so it hands
// each command that can be cancelled to another goroutine.
func (a *adapter) CostNote() string {
	if a.pipelined {
		return ""
	}
	return "the adapter of a rueidis client from New or NewNamed (or from NewClient with DisableAutoPipelining, the deprecated DialFn, or a cluster or sentinel client) cannot leave a command's cancellation to rueidis, so each command that can be cancelled is handed to another goroutine; make a client of one server with lockswap's rueidis.NewClient (docs/configuration.md)"
}
