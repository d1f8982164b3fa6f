// Package redisclient is the small interface through which every Redis
// backend of lockswap talks to Redis. The adapters are sub-packages, one per
// client library, so that a program links only the library it uses:
//
//	rc := goredis.New(rdb)   // redisclient/goredis: *redis.Client, *redis.ClusterClient, *redis.Ring, redis.UniversalClient
//	rc := redigo.New(pool)   // redisclient/redigo: *redis.Pool
//	rc := rueidis.New(c)     // redisclient/rueidis: rueidis.Client (auto-pipelining)
//
// Every command is bounded by its context: redigo through DoContext;
// rueidis on its own (it returns when the context ends); go-redis on its
// sockets only when the client was built with
// Options.ContextTimeoutEnabled = true and no ReadTimeout or WriteTimeout
// of -2 (otherwise go-redis bounds a command by its timeouts, or not at
// all, and the adapter keeps the context's bounds itself).
// Scripts go by EVALSHA, falling back to EVAL once when the server answers
// NOSCRIPT (after a restart or SCRIPT FLUSH).
package redisclient

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"
)

// Client is the set of Redis operations the lock backends need. Results are
// normalised across clients: integers as int64, bulk and status strings as
// string, arrays as []any, a nil reply as nil. A Redis error reply matches
// [ErrReply]; any other error is a transport error (connection refused,
// timeout, context ended).
type Client interface {
	// SetNXPX runs SET key value NX PX ttl and reports whether it was set.
	SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// SetNX runs SETNX key value (no expiry) and reports whether it was set.
	SetNX(ctx context.Context, key, value string) (bool, error)
	// Get returns the string value of key, and false when the key is absent.
	Get(ctx context.Context, key string) (string, bool, error)
	// GetSet sets key to value and returns the old value, false when absent.
	GetSet(ctx context.Context, key, value string) (string, bool, error)
	// Del deletes keys and returns how many existed.
	Del(ctx context.Context, keys ...string) (int64, error)
	// Time returns the server's clock (TIME).
	Time(ctx context.Context) (time.Time, error)
	// Run runs script by EVALSHA with keys as KEYS and args as ARGV,
	// loading it with EVAL when the server does not know it.
	Run(ctx context.Context, script *Script, keys []string, args ...any) (any, error)
	// Do runs any other command (INFO, SCAN, PTTL, TYPE, ...).
	Do(ctx context.Context, args ...any) (any, error)
	// String names the client for messages: the address where known. It
	// never contains a password.
	String() string
	// Addr identifies the data the client reaches: "host:port/db" for one
	// server (host lower case, IP addresses in canonical form),
	// "cluster:host:port,..." or "ring:host:port,.../db" for a go-redis
	// cluster or ring (sorted). Two clients with the same non-empty Addr
	// reach the same keys. "" means unknown (a redigo pool given no
	// address, a go-redis failover client): see [Store].
	Addr() string
}

// ErrReply is matched by errors that are Redis error replies (WRONGTYPE,
// NOSCRIPT, ERR ...), as opposed to transport errors.
var ErrReply = errors.New("redis error reply")

// ReplyError is a Redis error reply. It matches [ErrReply].
type ReplyError struct{ Msg string }

func (e *ReplyError) Error() string { return "redis: " + e.Msg }

// Is reports whether target is [ErrReply].
func (e *ReplyError) Is(target error) bool { return target == ErrReply }

// IsWrongType reports whether err is a WRONGTYPE reply: the key holds a
// value of another Redis type.
func IsWrongType(err error) bool {
	var re *ReplyError
	// Inside a script the reply is wrapped ("ERR Error running script ...
	// WRONGTYPE ..."), so look for the code anywhere in the message.
	return errors.As(err, &re) && strings.Contains(re.Msg, "WRONGTYPE")
}

// IsTransport reports whether err is an error that is not a reply from
// Redis (connection refused or reset, timeout, context ended): the outcome
// of a request that failed with it is unknown, as the request may have run.
func IsTransport(err error) bool { return err != nil && !errors.Is(err, ErrReply) }

// IsPermanent reports whether err is an error that retrying cannot fix: a
// TLS certificate that did not verify on either side (see
// [CertificateReason]), or a Redis error reply for authentication or
// permission (NOAUTH, WRONGPASS, NOPERM), a wrong type under a key
// (WRONGTYPE), keys in several cluster slots (CROSSSLOT), a database
// number the server does not have, an unknown or disabled command, or a
// script that failed on its own (a Lua runtime error), or a server that
// answered a TLS handshake in plain text (a tls.RecordHeaderError). A backend fails such
// an attempt at once with lockswap.ErrInvalid instead of waiting for the
// server to "come back". Transport errors are not replies; and replies
// that say the server is busy or changing roles (LOADING, BUSY,
// MASTERDOWN, READONLY, CLUSTERDOWN, TRYAGAIN, MOVED, ASK, OOM,
// NOREPLICAS) are not permanent, also when a script raised them.
func IsPermanent(err error) bool { return PermanentReason(err) != "" }

// PermanentReason returns, for an error that [IsPermanent] accepts, a short
// hint that tells the user what to fix; "" otherwise.
func PermanentReason(err error) string {
	if err == nil {
		return ""
	}
	if reason := CertificateReason(err); reason != "" {
		return reason
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		// The server answered the TLS handshake with bytes that are not
		// TLS: it speaks plain text (a handshake it does not answer at
		// all stays an outage: it cannot be told from a hung server).
		return "the server answered the TLS handshake in plain text: use redis:// (not rediss://, no tls params) for a server without TLS, or enable TLS on it"
	}
	// The SELECT of the connection handshake; the clients wrap it in
	// their own words (rueidis drops the ERR), so the text is what is
	// common.
	if strings.Contains(err.Error(), "DB index is out of range") {
		return "the server has no such database: use a database number below its databases setting (16 by default: /0 to /15)"
	}
	var re *ReplyError
	if !errors.As(err, &re) {
		return ""
	}
	return permanentReason(re.Msg)
}

// replyCodes returns the error codes a reply carries: its first word and,
// for an error raised inside a script and wrapped by it (Redis 6: "ERR
// Error running script ... -READONLY ..."; Redis 7 keeps the inner code
// first), the word after each " -".
func replyCodes(msg string) []string {
	code, _, _ := strings.Cut(msg, " ")
	codes := []string{code}
	for rest := msg; ; {
		i := strings.Index(rest, " -")
		if i < 0 {
			return codes
		}
		rest = rest[i+2:]
		c, _, _ := strings.Cut(rest, " ")
		codes = append(codes, c)
	}
}

func permanentReason(msg string) string {
	codes := replyCodes(msg)
	for _, c := range codes {
		switch c {
		case "LOADING", "BUSY", "MASTERDOWN", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "OOM", "NOREPLICAS", "NOSCRIPT":
			return ""
		}
	}
	for _, c := range codes {
		switch c {
		case "NOAUTH", "WRONGPASS":
			return "authentication failed: check the password (and user) in the connection settings"
		case "NOPERM":
			return "the Redis user lacks a permission the lock needs (ACL): grant the commands and keys listed in the docs"
		case "WRONGTYPE":
			return "a key the lock uses holds another Redis type: it is not a lock"
		case "CROSSSLOT":
			return "the keys of one lock request are in different Redis Cluster hash slots: use lock keys that contain no '}' outside a hash tag ({...}), see docs/cluster.md"
		}
	}
	switch {
	case strings.Contains(msg, "No permissions"),
		// Redis 7 inside a script: "ERR The user executing the script
		// can't run this command or subcommand" (or access a key).
		strings.Contains(msg, "user executing the script can't"):
		return "the Redis user lacks a permission the lock needs (ACL): grant the commands and keys listed in the docs"
	case codes[0] == "ERR" && strings.Contains(msg, "unknown command"):
		return "the server does not know a command the lock needs (renamed or disabled, or not Redis)"
	case codes[0] == "ERR" && (strings.Contains(msg, "Error running script") || strings.Contains(msg, "user_script")):
		return "a lock script failed on the server"
	}
	return ""
}

// Script is a Lua script with its SHA1, for EVALSHA.
type Script struct {
	src, sha string
}

// NewScript returns a Script for src. Scripts must take every key and value
// through KEYS and ARGV, never by string building. The script is known by
// its SHA from then on ([ScriptBySHA]).
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	s := &Script{src: src, sha: hex.EncodeToString(sum[:])}
	if known, loaded := scripts.LoadOrStore(s.sha, s); loaded {
		return known.(*Script)
	}
	return s
}

// scripts are the scripts NewScript made, by SHA.
var scripts sync.Map

// ScriptBySHA returns the script NewScript made whose SHA1 is sha, or nil.
// An adapter that is given a script as a generic EVALSHA command (a
// [SplitConn]) uses it to fall back to EVAL on a NOSCRIPT reply by itself,
// as [Client.Run] does.
func ScriptBySHA(sha string) *Script {
	if s, ok := scripts.Load(sha); ok {
		return s.(*Script)
	}
	return nil
}

// Source returns the script's Lua source.
func (s *Script) Source() string { return s.src }

// SHA returns the script's SHA1 in hex.
func (s *Script) SHA() string { return s.sha }

// IsNil reports whether c is nil or an interface holding a nil pointer, so
// that backends can reject a nil client with a clear error.
func IsNil(c any) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// Splitter is implemented by adapters that can hold one connection and
// split sending from receiving, so that one goroutine can pipeline commands
// to several servers: send to all, flush all, then read every reply
// (Redlock's fan-out). The redigo adapter implements it, and so does the
// grouped form of a rueidis adapter to one server ([Grouper]), whose
// split conns hand their commands to its batches instead of holding a
// connection.
type Splitter interface {
	// Split takes a connection from the pool; Close returns it.
	Split(ctx context.Context) (SplitConn, error)
}

// SplitConn is one connection held for pipelined send and receive.
type SplitConn interface {
	// Send buffers a command.
	Send(cmd string, args ...any) error
	// Flush writes the buffered commands.
	Flush() error
	// Receive reads one reply, normalised like Client.Do, waiting at most
	// timeout; an error reply matches ErrReply.
	Receive(timeout time.Duration) (any, error)
	// Close returns the connection to its pool (a connection with unread
	// replies is closed instead by the pool's own check).
	Close() error
}

// Grouper is implemented by adapters that can send the commands of
// concurrent callers together (group commit): while one command is in
// flight, the commands other callers send wait and then go as one batch,
// one write and one read. Redlock asks each instance's client for its
// grouped form, as its instances share the machine's CPUs with many
// callers at once and fewer, larger writes serve them better. The rueidis
// adapter implements it.
type Grouper interface {
	// Grouped returns an adapter of the same client that groups; it has
	// the same identity (Addr, String) as the one it comes from. A batch
	// goes under a context of its own, without the callers' values.
	Grouped() Client
}
