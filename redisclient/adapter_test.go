package redisclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
)

// TestAdapters runs the same checks through both adapters, on miniredis and
// on a real redis-server.
func TestAdapters(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			t.Run("miniredis", func(t *testing.T) {
				mr := miniredis.RunT(t)
				checkAdapter(t, c.New(t, mr.Addr()), c.New(t, mr.Addr()), false)
			})
			t.Run("redis-server", func(t *testing.T) {
				srv := testserver.RedisT(t, testserver.RedisOptions{})
				checkAdapter(t, c.New(t, srv.Addr()), c.New(t, srv.Addr()), true)
			})
		})
	}
}

var (
	intScript   = redisclient.NewScript(`return tonumber(ARGV[1]) + 1`)
	strScript   = redisclient.NewScript(`return redis.call("GET", KEYS[1])`)
	arrScript   = redisclient.NewScript(`return {1, "two", false}`)
	flushScript = redisclient.NewScript(`return ARGV[1] .. KEYS[1]`)
)

func checkAdapter(t *testing.T, c, admin redisclient.Client, real bool) {
	ctx := context.Background()

	ok, err := c.SetNXPX(ctx, "k", "v1", 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("SetNXPX on a free key = %v, %v", ok, err)
	}
	if ok, err := c.SetNXPX(ctx, "k", "v2", 5*time.Second); err != nil || ok {
		t.Fatalf("SetNXPX on a taken key = %v, %v; want false", ok, err)
	}
	pttl, err := admin.Do(ctx, "PTTL", "k")
	if ms, _ := pttl.(int64); err != nil || ms <= 0 || ms > 5000 {
		t.Errorf("PTTL after SetNXPX 5s = %v, %v", pttl, err)
	}
	if v, found, err := c.Get(ctx, "k"); err != nil || !found || v != "v1" {
		t.Errorf("Get = %q, %v, %v; want v1 (the second SetNXPX must not overwrite)", v, found, err)
	}
	if _, found, err := c.Get(ctx, "absent"); err != nil || found {
		t.Errorf("Get of an absent key = found %v, %v", found, err)
	}

	if ok, err := c.SetNX(ctx, "plain", "1"); err != nil || !ok {
		t.Fatalf("SetNX = %v, %v", ok, err)
	}
	if ok, err := c.SetNX(ctx, "plain", "2"); err != nil || ok {
		t.Fatalf("SetNX on a taken key = %v, %v", ok, err)
	}
	if pttl, _ := admin.Do(ctx, "PTTL", "plain"); pttl != int64(-1) {
		t.Errorf("PTTL after SetNX = %v, want -1 (no expiry)", pttl)
	}
	if old, found, err := c.GetSet(ctx, "plain", "3"); err != nil || !found || old != "1" {
		t.Errorf("GetSet = %q, %v, %v; want old value 1", old, found, err)
	}
	if _, found, err := c.GetSet(ctx, "fresh", "x"); err != nil || found {
		t.Errorf("GetSet of an absent key = found %v, %v", found, err)
	}
	if n, err := c.Del(ctx, "plain", "fresh", "absent"); err != nil || n != 2 {
		t.Errorf("Del of 2 present and 1 absent key = %d, %v", n, err)
	}

	if now, err := c.Time(ctx); err != nil || now.Sub(time.Now()).Abs() > time.Minute {
		t.Errorf("Time = %v, %v; want about now", now, err)
	}

	if v, err := c.Run(ctx, intScript, nil, 41); err != nil || v != int64(42) {
		t.Errorf("int script = %#v, %v; want int64(42)", v, err)
	}
	if v, err := c.Run(ctx, strScript, []string{"k"}); err != nil || v != "v1" {
		t.Errorf("string script = %#v, %v; want \"v1\"", v, err)
	}
	if v, err := c.Run(ctx, strScript, []string{"absent"}); err != nil || v != nil {
		t.Errorf("nil script reply = %#v, %v; want nil", v, err)
	}
	v, err := c.Run(ctx, arrScript, nil)
	if arr, ok := v.([]any); err != nil || !ok || len(arr) != 3 || arr[0] != int64(1) || arr[1] != "two" || arr[2] != nil {
		t.Errorf("array script = %#v, %v; want [1 two nil] (Lua false is a nil reply)", v, err)
	}

	// NOSCRIPT fallback: after SCRIPT FLUSH the script is loaded again.
	if _, err := admin.Do(ctx, "SCRIPT", "FLUSH"); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	if v, err := c.Run(ctx, flushScript, []string{"b"}, "a"); err != nil || v != "ab" {
		t.Errorf("script after SCRIPT FLUSH = %#v, %v; want \"ab\" via the EVAL fallback", v, err)
	}

	// Error replies are told apart from transport errors.
	if _, err := admin.Do(ctx, "HSET", "hash", "f", "v"); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Get(ctx, "hash")
	if !errors.Is(err, redisclient.ErrReply) || !redisclient.IsWrongType(err) {
		t.Errorf("Get on a hash: err = %v, want a WRONGTYPE reply matching ErrReply", err)
	}
	if _, err := c.Do(ctx, "NOSUCHCOMMAND"); !errors.Is(err, redisclient.ErrReply) {
		t.Errorf("unknown command: err = %v, want ErrReply", err)
	}

	if real {
		// The context bounds a command that the server does not answer.
		if _, err := admin.Do(ctx, "CLIENT", "PAUSE", "3000", "ALL"); err != nil {
			t.Fatalf("CLIENT PAUSE: %v", err)
		}
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		start := time.Now()
		_, _, err := c.Get(tctx, "k")
		cancel()
		if err == nil || errors.Is(err, redisclient.ErrReply) {
			t.Errorf("Get on a paused server with a 100ms context: err = %v, want a transport error", err)
		}
		if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
			t.Errorf("Get on a paused server returned after %v: the context did not bound the command", elapsed)
		}
		admin.Do(ctx, "CLIENT", "UNPAUSE")
	}
}

func TestTransportErrorIsNotReply(t *testing.T) {
	for _, c := range redistest.Clients {
		cl := c.New(t, "127.0.0.1:1") // nothing listens on port 1
		_, _, err := cl.Get(context.Background(), "k")
		if err == nil || errors.Is(err, redisclient.ErrReply) {
			t.Errorf("%s: Get on a closed port: err = %v, want a transport error, not ErrReply", c.Name, err)
		}
	}
}

// TestPermanentReplies: the replies retrying cannot fix are permanent, also
// when a script raised them; those that say the server is busy or changing
// roles are not, also when a script raised them (a failover must not turn
// into ErrInvalid).
func TestPermanentReplies(t *testing.T) {
	for msg, want := range map[string]bool{
		"WRONGPASS invalid username-password pair or user is disabled.":                                                          true,
		"NOAUTH Authentication required.":                                                                                        true,
		"NOPERM User app has no permissions to run the 'eval' command":                                                           true,
		"WRONGTYPE Operation against a key holding the wrong kind of value":                                                      true,
		"ERR unknown command 'EVALSHA', with args beginning with: ":                                                              true,
		"ERR user_script:1: attempt to compare nil with number script: 5c5d1f, on @user_script:1.":                               true,
		"WRONGTYPE Operation against a key holding the wrong kind of value script: 5c5d1f, on @user_script:3.":                   true,
		"ERR Error running script (call to f_5c5d1f): @user_script:3: @user_script: 3: -WRONGTYPE Operation against a key":       true,
		"READONLY You can't write against a read only replica. script: 5c5d1f, on @user_script:1.":                               false,
		"ERR Error running script (call to f_5c5d1f): @user_script:1: @user_script: 1: -READONLY You can't write against a read": false,
		"OOM command not allowed when used memory > 'maxmemory'. script: 5c5d1f, on @user_script:1.":                             false,
		"LOADING Redis is loading the dataset in memory":                                                                         false,
		"BUSY Redis is busy running a script.":                                                                                   false,
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.":                                       false,
		"CLUSTERDOWN The cluster is down":                                                                                        false,
		"CROSSSLOT Keys in request don't hash to the same slot":                                                                  true,
		"MOVED 3999 127.0.0.1:6381":                                                                                              false,
		"NOSCRIPT No matching script. Please use EVAL.":                                                                          false,
	} {
		err := fmt.Errorf("wrapped: %w", &redisclient.ReplyError{Msg: msg})
		if got := redisclient.IsPermanent(err); got != want {
			t.Errorf("IsPermanent(%q) = %v, want %v", msg, got, want)
		}
	}
	if redisclient.IsPermanent(errors.New("dial tcp: connection refused")) {
		t.Error("a transport error is permanent")
	}
}
