package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/queuetest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

type acquired struct {
	id  int
	l   lockswap.Lock
	err error
}

// enqueue starts an Acquire by caller id on lk and waits until it is in the
// line (want waiters), so that arrival order is known.
func enqueue(t *testing.T, ctx context.Context, lk *singleredis.Locker, key string, id, want int, r lockswap.RetryStrategy, out chan<- acquired) {
	t.Helper()
	go func() {
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second), lockswap.WithRetry(r))
		out <- acquired{id, l, err}
	}()
	queuetest.WaitUntil(t, fmt.Sprintf("caller %d queued", id), func() bool { return singleredis.Waiting(lk, key) == want })
}

var (
	poll2ms = lockswap.ConstantRetry(2 * time.Millisecond)
	hourly  = lockswap.ConstantRetry(time.Hour) // only a wake-up makes the next attempt
)

// TestReleaseHandsOverAtOnce: a local waiter whose retry delay is an hour
// gets the key as soon as the Locker's holder releases it.
func TestReleaseHandsOverAtOnce(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "handover"
			lk := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
			l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			out := make(chan acquired, 2)
			enqueue(t, ctx, lk, key, 1, 1, hourly, out)
			enqueue(t, ctx, lk, key, 2, 2, hourly, out)
			for want := 1; want <= 2; want++ {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case r := <-out:
					if r.err != nil || r.id != want {
						t.Fatalf("got caller %d (%v), want caller %d", r.id, r.err, want)
					}
					l = r.l
				case <-time.After(10 * time.Second):
					t.Fatalf("caller %d (retry delay 1h) not handed the key when the Locker's holder released it", want)
				}
			}
			l.Release(ctx)
		})
	}
}

// TestCancelledLocalWaiter: a cancelled waiter leaves the line (in the
// middle, or as head) and does not block the ones behind it.
func TestCancelledLocalWaiter(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "cancel"
			other := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
			lk := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
			held, err := other.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			ctxA, cancelA := context.WithCancel(ctx)
			ctxB, cancelB := context.WithCancel(ctx)
			defer cancelA()
			defer cancelB()
			outA, outB, outC := make(chan acquired, 1), make(chan acquired, 1), make(chan acquired, 1)
			enqueue(t, ctxA, lk, key, 0, 1, poll2ms, outA)
			enqueue(t, ctxB, lk, key, 1, 2, poll2ms, outB)
			enqueue(t, ctx, lk, key, 2, 3, poll2ms, outC)
			for _, w := range []struct {
				name   string
				cancel context.CancelFunc
				out    chan acquired
				left   int
			}{{"middle", cancelB, outB, 2}, {"head", cancelA, outA, 1}} {
				w.cancel()
				r := <-w.out
				if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, lockswap.ErrHeld) {
					t.Errorf("cancelled %s waiter: err = %v, want it to match context.Canceled and ErrHeld", w.name, r.err)
				}
				queuetest.WaitUntil(t, "cancelled "+w.name+" waiter left the line", func() bool { return singleredis.Waiting(lk, key) == w.left })
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-outC:
				if r.err != nil {
					t.Fatal(r.err)
				}
				r.l.Release(ctx)
			case <-time.After(10 * time.Second):
				t.Fatal("the last waiter did not get the freed key: cancelled waiters blocked it")
			}
			if k := singleredis.QueuedKeys(lk); k != 0 {
				t.Errorf("%d keys still queued", k)
			}
		})
	}
}

// TestTryAcquireBarges shows the documented exception: TryAcquire does not
// queue, so it can take a key that a waiting Acquire of the same Locker
// asked for first.
func TestTryAcquireBarges(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx, key := context.Background(), "barge"
	other := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
	lk := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
	held, err := other.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	out := make(chan acquired, 1)
	r := &queuetest.CountingRetry{Delay: time.Hour}
	enqueue(t, wctx, lk, key, 0, 1, r, out)
	// Being in line is not enough: the waiter must have made its first
	// attempt (and found the key held), or it could take the key that the
	// release below frees. The queue asks NextDelay(1) once before it
	// queues (does the policy retry at all?) and again after that failed
	// attempt.
	queuetest.WaitUntil(t, "the waiter's first attempt failed", func() bool { return r.Calls() >= 2 })
	// Another client's release does not wake local waiters: the waiter
	// sleeps its (hour-long) delay and TryAcquire gets in first.
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire while a local Acquire waits for a free key: %v, want the lock (TryAcquire does not queue)", err)
	}
	if w := singleredis.Waiting(lk, key); w != 1 {
		t.Errorf("%d waiting, want the Acquire still in line", w)
	}
	// Its release wakes the waiting Acquire.
	l.Release(ctx)
	got := <-out
	if got.err != nil {
		t.Fatalf("waiting Acquire after the barging lock was released: %v", got.err)
	}
	got.l.Release(ctx)
	cancel()
}

// TestLocalQueue runs the shared checks of the local queue
// (internal/queuetest): arrival order with wake-ups by release, for the
// mutex and for permits, and fairness of 8 goroutines cycling on one key
// (the bench's contended scenario).
func TestLocalQueue(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		s := queuetest.Subject{
			NewLocker: func(t *testing.T) lockswap.Locker {
				return newLocker(t, srv.Addr(), c.New, singleredis.Options{Prefix: "queue:"})
			},
			Waiting: func(lk lockswap.Locker, key string) int { return singleredis.Waiting(lk.(*singleredis.Locker), key) },
		}
		t.Run(c.Name+"/fifo", func(t *testing.T) { queuetest.FIFO(t, s) })
		t.Run(c.Name+"/fairness", func(t *testing.T) { queuetest.Fairness(t, s) })
		t.Run(c.Name+"/close", func(t *testing.T) { queuetest.CloseEndsWaits(t, s) })
		t.Run(c.Name+"/permit-fifo", func(t *testing.T) { queuetest.PermitFIFO(t, s) })
	}
}
