package singleredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
)

// permitFairRig runs the permit fair scripts (fenced, limit 1) on key "s"
// of a fresh server with the KEYS and ARGV the Go side sends: wait(token,
// ttl ms) and release(token) return the scripts' replies, regs the
// registrations hash.
func permitFairRig(t *testing.T) (wait func(tok string, ttl int64) [5]int64, release func(tok string), regs func() map[string]string) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redistest.GoRedis(t, srv.Addr())
	rc := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	keys := []string{"s", FairQueueKey("s"), FairWaitersKey("s"), FenceKey("s")}
	keep := fenceCounterTTL.Milliseconds()
	wait = func(tok string, ttl int64) [5]int64 {
		v, err := c.Run(ctx, permitFairWait, keys, tok, ttl, ttl, "ch", fairWaitersLimit, keep, 1)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := fairReply(v)
		return r
	}
	release = func(tok string) {
		if _, err := c.Run(ctx, permitFairRelease, keys, tok, keep); err != nil {
			t.Fatal(err)
		}
	}
	regs = func() map[string]string { return rc.HGetAll(ctx, keys[2]).Val() }
	return wait, release, regs
}

// TestPermitFairLateRenewalRequeued: a waiter whose registration died (a
// renewal late by more than its TTL) is queued again at its next renewal,
// at the tail: it is served before the waiters that register after that,
// whatever became of the queue's list meanwhile (here a hand-over raised
// the registrations' expiry and time passed; before the fix the list
// expired first, and the waiter's renewal left it registered but in no
// list: never served while others waited). Found by review.
func TestPermitFairLateRenewalRequeued(t *testing.T) {
	wait, release, regs := permitFairRig(t)
	if r := wait("H", 10000); r[0] != 1 {
		t.Fatalf("H: %v, want the free permit", r)
	}
	wait("V", 2000)
	wait("W", 200)
	release("H") // to V
	time.Sleep(1750 * time.Millisecond)
	if r := wait("W", 2000); r[0] != 0 {
		t.Fatalf("W's late renewal: %v, want a wait", r)
	}
	wait("X", 2000) // registers after W's renewal
	release("V")
	if h := regs()["h0"]; !strings.HasPrefix(h, "W ") {
		t.Errorf("the release handed the permit to %q, want W, queued again before X registered (registrations %v)", h, regs())
	}
}

// TestPermitFairRecordsBounded: the record of a hand-over is one field
// per slot, removed or replaced by the slot's next holder: handed holders
// that die leave no more than that, and the queue's capacity
// (MaxFairWaiters) is not used up by them. Found by review.
func TestPermitFairRecordsBounded(t *testing.T) {
	SetFairWaitersLimit(t, 3)
	wait, release, regs := permitFairRig(t)
	wait("A", 10000)
	prev := "A"
	for _, w := range []string{"W1", "W2", "W3"} {
		wait(w, 100)      // queues behind the holder
		wait("Z"+w, 3000) // and another behind it
		release(prev)     // handed to w, whose process then dies
		time.Sleep(150 * time.Millisecond)
		if r := wait("Z"+w, 3000); r[0] != 1 {
			t.Fatalf("Z%s: %v, want the permit of the dead holder", w, r)
		}
		prev = "Z" + w
	}
	if r := wait("N", 3000); r[0] != 0 {
		t.Errorf("a newcomer: %v, want it queued (registrations %v)", r, regs())
	}
	records := 0
	for f := range regs() {
		if strings.HasPrefix(f, "h") {
			records++
		}
	}
	if records > 1 {
		t.Errorf("%d hand-over records for a semaphore of 1 slot: %v", records, regs())
	}
}
