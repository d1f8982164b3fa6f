package goredis_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// workerFrame is on the stack of each of the adapter's worker goroutines.
const workerFrame = "redisclient/internal/workers.worker("

// workerIdle is the adapter's: a worker exits between it and twice it
// after its last command.
const workerIdle = workers.Idle

// workerStacks returns the stacks of the adapter's worker goroutines, and how
// many of them wait for a command (blocked in their select).
func workerStacks() (stacks []string, parked int) {
	stacks = stalltest.Goroutines(workerFrame)
	for _, g := range stacks {
		if header, _, _ := strings.Cut(g, "\n"); strings.Contains(header, "[select") {
			parked++
		}
	}
	return stacks, parked
}

// waitWorkers waits, up to 5 s, until ok holds of the workers.
func waitWorkers(t *testing.T, what string, ok func(n, parked int) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		stacks, parked := workerStacks()
		if ok(len(stacks), parked) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d workers after 5 s (%d waiting):\n%s", what, len(stacks), parked, strings.Join(stacks, "\n\n"))
		}
	}
}

// TestWorkers: a command under a context that can be cancelled runs on one
// of the adapter's worker goroutines; the next command goes to a worker
// that waits instead of starting a goroutine (whose stack would grow again
// to go-redis's depth), and the workers of a burst of 16 concurrent
// commands end soon after it: none is left behind. With and without
// ContextTimeoutEnabled.
func TestWorkers(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, contexts := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: contexts})
		t.Cleanup(func() { rdb.Close() })
		c := goredis.New(rdb)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		setGet := func(key string) {
			if _, err := redisclient.SetNXPXGet(ctx, c, key, "v", time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		waitWorkers(t, "workers left by earlier tests", func(n, _ int) bool { return n == 0 })

		// A second command reaches the waiting worker. The worker cannot
		// have ended before workerIdle has passed since the first command
		// started; a round that took longer proves nothing and is run again.
		for round := 0; ; round++ {
			start := time.Now()
			setGet("first")
			waitWorkers(t, "after one command", func(n, parked int) bool { return parked >= 1 })
			before, _ := workerStacks()
			setGet("second")
			after, _ := workerStacks()
			if time.Since(start) >= workerIdle {
				if round == 20 {
					t.Fatalf("no round took less than %v", workerIdle)
				}
				continue
			}
			if len(after) > len(before) {
				t.Errorf("contexts=%v: a command started a worker while one waited (%d before, %d after)", contexts, len(before), len(after))
			}
			break
		}

		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 20 {
					setGet(strings.Repeat("k", g+1) + string(rune('a'+i)))
				}
			})
		}
		wg.Wait()
		waitWorkers(t, "the burst's workers did not end", func(n, _ int) bool { return n == 0 })
	}
}
