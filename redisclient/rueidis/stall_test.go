package rueidis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
	"github.com/lockswap/lockswap/registry"
)

// stallValue is larger than every buffer between a client and a stalled
// proxy (socket buffers autotune to a few megabytes on loopback): a
// command carrying it blocks its writer until the proxy resumes.
var stallValue = strings.Repeat("x", 16<<20)

// dialGrouped opens addr as a client=rueidis URL does and returns the
// grouped adapter; the test's cleanup closes the client.
func dialGrouped(t *testing.T, addr string) redisclient.Client {
	t.Helper()
	c, closer, err := rueidis.Dial(context.Background(), registry.RedisServer{Addr: addr, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return c.(redisclient.Grouper).Grouped()
}

// TestGroupedStalledWriter: while rueidis's writer is blocked on a
// connection whose writes stall, batches of the group commit queue behind
// it and their callers' deadlines pass, so each DoMulti returns early with
// its commands still in rueidis's queue. When the connection moves again
// the writer sends them: the adapter must not have cleared or refilled
// them (which crashed the writer, or sent a later batch's commands twice).
// Each INCR goes at most once.
//
// The callers send by Do, or, as redlock's fan-out does, through split
// conns (split.go), whose commands go in the same batches.
func TestGroupedStalledWriter(t *testing.T) {
	t.Run("Do", func(t *testing.T) {
		stalledWriter(t, func(ctx context.Context, c redisclient.Client, key string) {
			c.Do(ctx, "INCR", key) // outcome unknown: its deadline passes
		})
	})
	t.Run("Split", func(t *testing.T) {
		stalledWriter(t, func(ctx context.Context, c redisclient.Client, key string) {
			sc, err := c.(redisclient.Splitter).Split(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer sc.Close()
			if err := sc.Send("INCR", key); err != nil {
				t.Error(err)
				return
			}
			if err := sc.Flush(); err != nil {
				t.Error(err)
				return
			}
			d, _ := ctx.Deadline()
			sc.Receive(time.Until(d)) // outcome unknown: its deadline passes
		})
	})
}

func stalledWriter(t *testing.T, incr func(ctx context.Context, c redisclient.Client, key string)) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	p := stalltest.Start(t, srv.Addr())
	c := dialGrouped(t, p.Addr())
	ctx := context.Background()
	if _, err := c.SetNXPX(ctx, "warm", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	bctx, bcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer bcancel()
	bigDone := make(chan struct{})
	go func() {
		defer close(bigDone)
		c.SetNXPX(bctx, "big", stallValue, time.Minute) // outcome unknown
	}()
	for deadline := time.Now().Add(5 * time.Second); !rueidis.InFlight(c); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the large command never went")
		}
	}
	const waves, callers = 4, 8
	var keys []string
	var wg sync.WaitGroup
	wave := func(w int) *sync.WaitGroup {
		var ww sync.WaitGroup
		for i := range callers {
			key := fmt.Sprintf("incr-%d-%d", w, i)
			keys = append(keys, key)
			ww.Add(1)
			wg.Go(func() {
				defer ww.Done()
				wctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
				defer cancel()
				incr(wctx, c, key)
			})
		}
		return &ww
	}
	// The first wave waits behind the large command and goes as one batch
	// when it returns; each later wave gathers while the one before is in
	// flight, stalled, and goes when that batch's DoMulti gives up.
	prev := wave(0)
	<-bigDone
	for w := 1; w < waves; w++ {
		next := wave(w)
		prev.Wait()
		prev = next
	}
	wg.Wait()
	p.Resume()
	// Replies come in order: once this one has, rueidis has written every
	// command queued before it.
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Second)
	defer dcancel()
	if _, _, err := c.Get(dctx, "warm"); err != nil {
		t.Fatalf("GET after the proxy resumed: %v", err)
	}
	for _, key := range keys {
		v, _, err := c.Get(dctx, key)
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		if v != "" && v != "1" {
			t.Errorf("%s = %s: its INCR was sent more than once", key, v)
		}
	}
}
