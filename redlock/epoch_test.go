package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redlock"
)

// dumpSnapshot describes every key on the servers byte for byte: name,
// type, DUMP of the value and absolute expiry (PEXPIRETIME, which does not
// change as time passes). Real redis-server only (miniredis has neither
// command); snapshot in edges_test.go serves both.
func dumpSnapshot(t *testing.T, raws []*goredis.Client) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i, rc := range raws {
		keys, err := rc.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(keys)
		for _, k := range keys {
			typ, err := rc.Type(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			dump, err := rc.Dump(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			exp, err := rc.Do(ctx, "PEXPIRETIME", k).Int64()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %q %s %q %d", i, k, typ, dump, exp))
		}
	}
	return out
}

// keyspace records, per server, every keyspace notification (every write
// to any key) since the last call of its take.
type keyspace struct {
	raws    []*goredis.Client
	mu      sync.Mutex
	events  [][]string
	markers []chan struct{}
}

const keyspaceMarker = "redlock-epoch-test:marker"

func watchKeyspace(t *testing.T, ctx context.Context, raws []*goredis.Client, addrs []string) *keyspace {
	t.Helper()
	w := &keyspace{raws: raws, events: make([][]string, len(addrs))}
	for i, a := range addrs {
		if err := raws[i].ConfigSet(ctx, "notify-keyspace-events", "KA").Err(); err != nil {
			t.Fatal(err)
		}
		ps := redistest.GoRedisClient(t, a).PSubscribe(ctx, "__keyspace@0__:*", keyspaceMarker)
		t.Cleanup(func() { ps.Close() })
		for range 2 {
			if _, err := ps.Receive(ctx); err != nil { // the subscription confirmations
				t.Fatal(err)
			}
		}
		marker := make(chan struct{}, 1)
		w.markers = append(w.markers, marker)
		ch := ps.Channel()
		go func() {
			for m := range ch {
				if m.Channel == keyspaceMarker {
					marker <- struct{}{}
					continue
				}
				w.mu.Lock()
				w.events[i] = append(w.events[i], strings.TrimPrefix(m.Channel, "__keyspace@0__:")+" "+m.Payload)
				w.mu.Unlock()
			}
		}()
	}
	return w
}

// take returns and forgets server i's notifications of the writes done so
// far: it publishes a marker, which the server sends after every
// notification of an earlier write, and waits for it.
func (w *keyspace) take(t *testing.T, i int) []string {
	t.Helper()
	if err := w.raws[i].Publish(context.Background(), keyspaceMarker, "x").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.markers[i]:
	case <-time.After(10 * time.Second):
		t.Fatalf("instance %d: the marker did not arrive within 10 s", i)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := w.events[i]
	w.events[i] = nil
	return ev
}

// TestBadEpochChangesNothing: with RestartSafety, an epoch key that does not
// hold an epoch on a majority fails TryAcquire and Acquire at once with
// ErrInvalid, and the acquire script refuses it before it writes anything:
// no write at all happens on those instances (keyspace notifications on
// real redis-servers: the lock key never exists there, not even for the
// time of an undo), and every instance is byte for byte as before (keys,
// values, expiry times). With the bad epoch on every instance, no instance
// sees a write.
func TestBadEpochChangesNothing(t *testing.T) {
	bad := []string{
		"garbage", "", "1.2", "x.0.tag", "1.x.tag", "-1.0.tag", "+1.0.tag", " 1.0.tag", "1..tag", ".1.tag",
		"1234567890123456789.0.tag", "1.1234567890123456789.tag", "1e3.0.tag", "1.0", strings.Repeat("9", 1000),
	}
	for _, cl := range redistest.Clients {
		t.Run(cl.Name, func(t *testing.T) {
			ctx := ctxT(t)
			addrs, _ := realN(t, 3)
			raws := make([]*goredis.Client, len(addrs))
			for i, a := range addrs {
				raws[i] = redistest.GoRedisClient(t, a)
				// Something unrelated, with an expiry, that must stay as is.
				if err := raws[i].Set(ctx, "unrelated", "v", time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
			good := fmt.Sprintf("%d.0.test", time.Now().Add(-time.Hour).Unix()) // past its quarantine
			if err := raws[2].Set(ctx, redlock.EpochKey, good, 0).Err(); err != nil {
				t.Fatal(err)
			}
			lk := newLocker(t, addrs, cl.New, redlock.Options{RestartSafety: true, MaxTTL: time.Minute})
			w := watchKeyspace(t, ctx, raws, addrs)
			attempt := func(t *testing.T, victims []int) {
				t.Helper()
				for i := range raws {
					w.take(t, i) // the test's own writes
				}
				before := dumpSnapshot(t, raws)
				start := time.Now()
				l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
				if err == nil {
					l.Release(ctx) // so that the next cases start clean
				}
				if !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrUnavailable) {
					t.Errorf("TryAcquire: %v, want ErrInvalid only", err)
				} else if !strings.Contains(err.Error(), "is not a lockswap epoch") {
					t.Errorf("TryAcquire: %q does not say the epoch is not one", err)
				}
				actx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				l, err = lk.Acquire(actx, "k", lockswap.WithTTL(10*time.Second),
					lockswap.WithRetry(lockswap.ConstantRetry(5*time.Millisecond)))
				if err == nil {
					l.Release(ctx)
				}
				if !errors.Is(err, lockswap.ErrInvalid) || actx.Err() != nil {
					t.Errorf("Acquire with a 20 s context: %v, want ErrInvalid at once", err)
				}
				if elapsed := time.Since(start); elapsed > quickly {
					t.Errorf("TryAcquire and Acquire took %v: they must fail at once", elapsed)
				}
				waitBackground(t, lk)
				if after := dumpSnapshot(t, raws); !slices.Equal(before, after) {
					t.Errorf("servers changed:\nbefore %q\nafter  %q", before, after)
				}
				for i := range raws {
					ev := w.take(t, i)
					victim := false
					for _, v := range victims {
						victim = victim || v == i
					}
					if victim {
						if len(ev) != 0 {
							t.Errorf("instance %d, whose epoch is bad: writes %q, want none", i, ev)
						}
						continue
					}
					// A good instance takes the key and is undone: the
					// client learns of the others' epochs from their replies.
					for _, e := range ev {
						if !strings.HasPrefix(e, "k ") {
							t.Errorf("instance %d, whose epoch is good: write %q, want only the lock key's SET and its undo", i, e)
						}
					}
				}
			}
			for _, b := range bad {
				t.Run(fmt.Sprintf("majority/%.20q", b), func(t *testing.T) {
					for _, rc := range raws[:2] {
						if err := rc.Set(ctx, redlock.EpochKey, b, 0).Err(); err != nil {
							t.Fatal(err)
						}
					}
					attempt(t, []int{0, 1})
				})
			}
			t.Run("every instance", func(t *testing.T) {
				for _, rc := range raws {
					if err := rc.Set(ctx, redlock.EpochKey, "garbage", 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				attempt(t, []int{0, 1, 2})
			})
		})
	}
}
