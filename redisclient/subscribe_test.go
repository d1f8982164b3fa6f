package redisclient_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
)

// TestSubscribe: every adapter subscribes (returning once the server
// confirmed, so a message published right after arrives), delivers the
// messages, subscribes again after its connection was killed, and Close
// ends its goroutine and the server-side subscription.
func TestSubscribe(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	raw := redistest.GoRedisClient(t, srv.Addr())
	ctx := context.Background()
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			sub, ok := c.New(t, srv.Addr()).(redisclient.Subscriber)
			if !ok {
				t.Fatalf("the %s adapter does not implement redisclient.Subscriber", c.Name)
			}
			channel := "sub:" + c.Name
			got := make(chan string, 16)
			before := strings.Count(allStacks(), "Sub).run")
			s, err := sub.Subscribe(ctx, channel, func(p string) { got <- p })
			if err != nil {
				t.Fatal(err)
			}
			if n := raw.Publish(ctx, channel, "one").Val(); n != 1 {
				t.Fatalf("PUBLISH right after Subscribe reached %d subscribers, want 1", n)
			}
			if p := receive(t, got); p != "one" {
				t.Fatalf("got %q, want %q", p, "one")
			}
			// Kill the subscription's connection: the adapter subscribes
			// again, and messages flow once it has.
			if err := raw.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
				t.Fatal(err)
			}
			end := time.Now().Add(10 * time.Second)
			for raw.Publish(ctx, channel, "two").Val() == 0 {
				if time.Now().After(end) {
					t.Fatal("no subscriber 10 s after the connection was killed")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if p := receive(t, got); p != "two" {
				t.Fatalf("after the reconnection got %q, want %q", p, "two")
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			// Close waited for the goroutine's last instruction; give it a
			// moment to vanish from the stacks.
			end = time.Now().Add(5 * time.Second)
			for strings.Count(allStacks(), "Sub).run") != before {
				if time.Now().After(end) {
					t.Fatalf("the subscription goroutine still runs 5 s after Close")
				}
				time.Sleep(time.Millisecond)
			}
			end = time.Now().Add(5 * time.Second)
			for raw.Publish(ctx, channel, "three").Val() != 0 {
				if time.Now().After(end) {
					t.Fatal("the server still has the subscription 5 s after Close")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestSubscribeDeadline: Subscribe to a server that never answers returns
// with the context's error at its deadline.
func TestSubscribeDeadline(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	proxy := testserver.ProxyT(t, srv.Addr())
	proxy.Blackhole(true)
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			sub := c.New(t, proxy.Addr()).(redisclient.Subscriber)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			s, err := sub.Subscribe(ctx, "never", func(string) {})
			if err == nil {
				s.Close()
				t.Fatal("Subscribe through a black hole succeeded")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Subscribe returned %v after its 200 ms deadline", d)
			}
		})
	}
}

func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p := <-ch:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5 s")
		return ""
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
