package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

type acquired struct {
	id  int
	l   lockswap.Lock
	err error
}

// waitUntil polls cond (bounded): a condition, not a duration.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// enqueue starts an Acquire by caller id on lk and waits until it is in the
// line (want waiters), so that arrival order is known.
func enqueue(t *testing.T, ctx context.Context, lk *singleredis.Locker, key string, id, want int, r lockswap.RetryStrategy, out chan<- acquired) {
	t.Helper()
	go func() {
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second), lockswap.WithRetry(r))
		out <- acquired{id, l, err}
	}()
	waitUntil(t, fmt.Sprintf("caller %d queued", id), func() bool { return singleredis.Waiting(lk, key) == want })
}

var (
	poll2ms = lockswap.ConstantRetry(2 * time.Millisecond)
	hourly  = lockswap.ConstantRetry(time.Hour) // only a wake-up makes the next attempt
)

// TestLocalWaitersFIFO: goroutines of one Locker that wait for a key held
// by another client get it in arrival order.
func TestLocalWaitersFIFO(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "fifo"
			other := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
			lk := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
			held, err := other.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			const n = 5
			out := make(chan acquired, n)
			for i := 0; i < n; i++ {
				enqueue(t, ctx, lk, key, i, i+1, poll2ms, out)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				r := <-out
				if r.err != nil {
					t.Fatalf("caller %d: %v", r.id, r.err)
				}
				if r.id != i {
					t.Fatalf("acquisition %d went to caller %d, want %d: local waiters must get the key in arrival order", i, r.id, i)
				}
				if err := r.l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if k := singleredis.QueuedKeys(lk); k != 0 {
				t.Errorf("%d keys still queued after every waiter left", k)
			}
		})
	}
}

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
				waitUntil(t, "cancelled "+w.name+" waiter left the line", func() bool { return singleredis.Waiting(lk, key) == w.left })
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
	enqueue(t, wctx, lk, key, 0, 1, hourly, out)
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
	r := <-out
	if r.err != nil {
		t.Fatalf("waiting Acquire after the barging lock was released: %v", r.err)
	}
	r.l.Release(ctx)
	cancel()
}

// TestCloseEndsLocalWaits: Close makes every waiting Acquire return
// ErrClosed.
func TestCloseEndsLocalWaits(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx, key := context.Background(), "close"
	other := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
	lk := newLocker(t, srv.Addr(), redistest.GoRedis, singleredis.Options{})
	held, err := other.TryAcquire(ctx, key, lockswap.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	const n = 3
	out := make(chan acquired, n)
	for i := 0; i < n; i++ {
		enqueue(t, ctx, lk, key, i, i+1, hourly, out)
	}
	lk.Close()
	for i := 0; i < n; i++ {
		select {
		case r := <-out:
			if !errors.Is(r.err, lockswap.ErrClosed) {
				t.Errorf("waiting Acquire after Close: err = %v, want ErrClosed", r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting Acquire did not end at Close")
		}
	}
	if k := singleredis.QueuedKeys(lk); k != 0 {
		t.Errorf("%d keys still queued after Close", k)
	}
}

// TestContendedFairness: 8 goroutines cycling on one key through one Locker
// (the bench's contended scenario) take it in turn: fewest ÷ most
// acquisitions ≥ 0.75, by counts. Without the local queue the releasing
// goroutine wins most rounds (0.1–0.4). The goroutines all queue behind a
// first holder before counting starts, so the count does not depend on how
// fast they start.
func TestContendedFairness(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			ctx, key := context.Background(), "fair"
			lk := newLocker(t, srv.Addr(), c.New, singleredis.Options{})
			first, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			const goroutines, total = 8, 320
			var (
				taken, holders atomic.Int64
				counts         [goroutines]int
				wg             sync.WaitGroup
			)
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						l, err := lk.Acquire(ctx, key, lockswap.WithTTL(10*time.Second))
						if err != nil {
							t.Error(err)
							return
						}
						if holders.Add(1) != 1 {
							t.Error("two holders at once")
						}
						more := taken.Add(1) <= total
						if more {
							counts[g]++
						}
						holders.Add(-1)
						if err := l.Release(ctx); err != nil {
							t.Error(err)
							return
						}
						if !more {
							return
						}
					}
				}()
			}
			waitUntil(t, "all goroutines queued", func() bool { return singleredis.Waiting(lk, key) == goroutines })
			first.Release(ctx)
			wg.Wait()
			lo, hi := counts[0], counts[0]
			for _, n := range counts {
				lo, hi = min(lo, n), max(hi, n)
			}
			if f := float64(lo) / float64(hi); f < 0.75 {
				t.Errorf("fairness %.2f (acquisitions per goroutine %v), want ≥ 0.75", f, counts)
			}
		})
	}
}
