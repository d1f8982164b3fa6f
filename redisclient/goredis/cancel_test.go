package goredis_test

import (
	"context"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/registry"
)

// dialDefaults opens a client with go-redis's default options, which
// ignores contexts (ContextTimeoutEnabled is off): the adapter must keep
// the context's bounds itself.
func dialDefaults(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: s.DialTimeout})
	return goredis.New(rdb), rdb, nil
}

// dialNoDeadlines opens a client with ContextTimeoutEnabled whose
// timeouts of -2 keep go-redis from setting any socket deadline, the
// context's included: the adapter must keep the context's bounds itself,
// as for a client that ignores contexts.
func dialNoDeadlines(_ context.Context, s registry.RedisServer) (redisclient.Client, io.Closer, error) {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: s.DialTimeout,
		ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2})
	return goredis.New(rdb), rdb, nil
}

// TestCancelHung: a command returns soon after its context (without a
// deadline, or with one far off) is cancelled, with the server hung,
// before and after the connection is up; with ContextTimeoutEnabled and
// without.
func TestCancelHung(t *testing.T) {
	t.Run("context-timeout", func(t *testing.T) { stalltest.RunCancelHung(t, goredis.Dial, nil) })
	t.Run("defaults", func(t *testing.T) { stalltest.RunCancelHung(t, dialDefaults, nil) })
	t.Run("no-socket-deadlines", func(t *testing.T) { stalltest.RunCancelHung(t, dialNoDeadlines, nil) })
}

// TestSubscribeHung: Subscribe returns soon after its context ends (its
// deadline passes or it is cancelled), with the server hung, before and
// after the connection is up; with ContextTimeoutEnabled and without.
func TestSubscribeHung(t *testing.T) {
	t.Run("context-timeout", func(t *testing.T) { stalltest.RunSubscribeHung(t, goredis.Dial) })
	t.Run("defaults", func(t *testing.T) { stalltest.RunSubscribeHung(t, dialDefaults) })
}

// TestDeadlineOnlyHung: a command under a context with a deadline and no
// Done channel returns at that deadline with the server hung, with
// ContextTimeoutEnabled, with go-redis's defaults, and with
// ContextTimeoutEnabled and timeouts of -2 (no socket deadlines).
func TestDeadlineOnlyHung(t *testing.T) {
	t.Run("context-timeout", func(t *testing.T) { stalltest.RunDeadlineOnlyHung(t, goredis.Dial) })
	t.Run("defaults", func(t *testing.T) { stalltest.RunDeadlineOnlyHung(t, dialDefaults) })
	t.Run("no-socket-deadlines", func(t *testing.T) { stalltest.RunDeadlineOnlyHung(t, dialNoDeadlines) })
}

// TestCancelWhileDialing: a command returns soon after its context is
// cancelled while another command's connection comes up.
func TestCancelWhileDialing(t *testing.T) {
	t.Run("context-timeout", func(t *testing.T) { stalltest.RunCancelWhileDialing(t, goredis.Dial) })
	t.Run("defaults", func(t *testing.T) { stalltest.RunCancelWhileDialing(t, dialDefaults) })
}
