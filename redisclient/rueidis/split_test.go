package rueidis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// splitOf returns c's Splitter (the grouped rueidis adapter of a single
// server must have one: redlock pipelines through it).
func splitOf(t *testing.T, c redisclient.Client) redisclient.Splitter {
	t.Helper()
	s, ok := c.(redisclient.Splitter)
	if !ok {
		t.Fatal("the grouped rueidis adapter does not implement redisclient.Splitter")
	}
	return s
}

var incrScript = redisclient.NewScript(`return redis.call("INCRBY", KEYS[1], ARGV[1])`)

// TestSplitRepliesInOrder: commands sent on a split conn, flushed, are
// answered in order, each reply normalised as Do gives it: SET NX PX GET
// (nil when set, the holder's value when held), a script by EVALSHA (one
// the server does not know yet: NewScript's scripts fall back to EVAL by
// themselves, as Run does; an unknown SHA's NOSCRIPT is an error reply),
// and any other command. Sent before and after the conn's first replies:
// the same conn serves the redlock fan-out's second request (EVAL, the
// plain SET fallback).
func TestSplitRepliesInOrder(t *testing.T) {
	c, _ := groupedBehindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sc, err := splitOf(t, c).Split(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	send := func(cmd string, args ...any) {
		t.Helper()
		if err := sc.Send(cmd, args...); err != nil {
			t.Fatalf("Send %s: %v", cmd, err)
		}
	}
	receive := func(string) (any, error) {
		t.Helper()
		return sc.Receive(5 * time.Second)
	}
	send("SET", "k", "a", "NX", "PX", int64(60000), "GET")
	send("SET", "k", "b", "NX", "PX", int64(60000), "GET")
	send("SET", "p", "c", "NX", "PX", int64(60000))
	send("EVALSHA", incrScript.SHA(), 1, "n", int64(5))
	send("EVALSHA", "0123456789012345678901234567890123456789", 1, "n", int64(5))
	send("GET", "k")
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, err := receive("SET NX PX GET, absent"); err != nil || v != nil {
		t.Errorf("SET NX PX GET on an absent key: %v, %v; want nil (set)", v, err)
	}
	if v, err := receive("SET NX PX GET, held"); err != nil || v != "a" {
		t.Errorf("SET NX PX GET on a held key: %v, %v; want the holder's \"a\"", v, err)
	}
	if v, err := receive("SET NX PX"); err != nil || v != "OK" {
		t.Errorf("SET NX PX on an absent key: %v, %v; want OK", v, err)
	}
	if v, err := receive("EVALSHA not loaded"); err != nil || v != int64(5) {
		t.Errorf("EVALSHA of a script the server does not know yet: %v, %v; want 5 (EVAL sent on NOSCRIPT)", v, err)
	}
	if v, err := receive("EVALSHA unknown"); !errors.Is(err, redisclient.ErrReply) || v != nil {
		t.Errorf("EVALSHA of an unknown SHA: %v, %v; want a NOSCRIPT error reply", v, err)
	}
	if v, err := receive("GET"); err != nil || v != "a" {
		t.Errorf("GET k: %v, %v; want \"a\"", v, err)
	}
	// The fallback's second round on the same conn: EVAL with the source.
	send("EVAL", incrScript.Source(), 1, "n", int64(5))
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, err := receive("EVAL"); err != nil || v != int64(10) {
		t.Errorf("EVAL: %v, %v; want 10", v, err)
	}
	if _, err := sc.Receive(time.Second); err == nil {
		t.Error("Receive with nothing in flight succeeded")
	}
}

// TestSplitBoundedOnSilentServer: on a server that accepts and never
// answers, Receive returns within its timeout (a transport error), and
// within the Split's context when that ends first; commands sent after
// the Split's context ended are not sent.
func TestSplitBoundedOnSilentServer(t *testing.T) {
	c, p := groupedBehindProxy(t)
	p.Blackhole(true)
	const bound = 2 * time.Second // generous: -race under load
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, err := splitOf(t, c).Split(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Send("GET", "warm"); err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := sc.Receive(100 * time.Millisecond); err == nil || !redisclient.IsTransport(err) {
		t.Errorf("Receive on a silent server: %v, want a transport error", err)
	}
	if took := time.Since(start); took > bound {
		t.Errorf("Receive with a 100 ms timeout returned after %v", took)
	}

	short, scancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer scancel()
	sc2, err := splitOf(t, c).Split(short)
	if err != nil {
		t.Fatal(err)
	}
	defer sc2.Close()
	if err := sc2.Send("GET", "warm"); err != nil {
		t.Fatal(err)
	}
	if err := sc2.Flush(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := sc2.Receive(time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive past the Split's 100 ms deadline: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > bound {
		t.Errorf("Receive under a 100 ms context returned after %v", took)
	}

}

// TestSplitLateCommand: a command flushed after the Split's context
// ended still goes, with a short window of its own, as a request written
// on a connection after the deadline does: redlock's fan-out sends the
// EVAL of a script on the conn whose EVALSHA got NOSCRIPT, after reading
// that reply late, and reads its reply with a short timeout.
func TestSplitLateCommand(t *testing.T) {
	c, _ := groupedBehindProxy(t)
	ctx, cancel := context.WithCancel(context.Background())
	sc, err := splitOf(t, c).Split(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	cancel()
	if err := sc.Send("SET", "late", "v", "NX", "PX", int64(60000)); err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	probe := conformance.StartLagProbe()
	v, err := sc.Receive(5 * time.Second)
	if lag := probe.Stop(); err != nil && probe.Extra() >= rueidis.LateSend {
		// The late command's own bound went to the scheduler: the machine
		// is too busy to tell anything here.
		t.Skipf("Receive of the late command: %v, with scheduling lags up to %v (its bound is %v)", err, lag, rueidis.LateSend)
	}
	if err != nil || v != "OK" {
		t.Errorf("Receive of a command flushed after the Split's context ended: %v, %v; want OK", v, err)
	}
	if v, ok, err := c.Get(context.Background(), "late"); err != nil || !ok || v != "v" {
		t.Errorf("GET late = %q, %v, %v; want \"v\"", v, ok, err)
	}
}
