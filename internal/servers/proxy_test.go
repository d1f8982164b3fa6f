package servers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/internal/testserver"
)

func itoa(i int) string { return strconv.Itoa(i) }

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func TestProxyRedisForwardDelayBlackhole(t *testing.T) {
	r := testserver.RedisT(t, servers.RedisOptions{})
	p := testserver.ProxyT(t, r.Addr())
	ctx := context.Background()
	c := newClient(t, p.Addr(), 200*time.Millisecond)

	if err := c.Set(ctx, "k", "through-proxy", 0).Err(); err != nil {
		t.Fatalf("SET via proxy: %v", err)
	}
	direct := newClient(t, r.Addr(), time.Second)
	if got, err := direct.Get(ctx, "k").Result(); err != nil || got != "through-proxy" {
		t.Fatalf("direct GET = %q, %v; want the value written via the proxy", got, err)
	}

	// The delay applies in each direction, so a round trip takes >= 2*d.
	const d = 150 * time.Millisecond
	slow := newClient(t, p.Addr(), 5*time.Second)
	if err := slow.Ping(ctx).Err(); err != nil { // open the pooled connection first
		t.Fatalf("PING: %v", err)
	}
	p.SetDelay(d)
	start := time.Now()
	if err := slow.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with delay: %v", err)
	}
	if el := time.Since(start); el < 2*d {
		t.Fatalf("PING with %v delay took %v, want >= %v", d, el, 2*d)
	}
	p.SetDelay(0)

	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	p.Blackhole(true)
	if err := c.Ping(ctx).Err(); !isTimeout(err) {
		p.Blackhole(false)
		t.Fatalf("PING through a blackhole: err = %v, want a timeout", err)
	}
	p.Blackhole(false)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after the blackhole was lifted: %v", err)
	}
}

func TestProxyPreservesOrderUnderDelay(t *testing.T) {
	p := testserver.ProxyT(t, echoServer(t))
	p.SetDelay(2 * time.Millisecond)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := make([]byte, 256<<10)
	rand.Read(want)
	go func() {
		for b := want; len(b) > 0; b = b[min(len(b), 1000):] {
			if _, err := conn.Write(b[:min(len(b), 1000)]); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("reading echo: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes came back reordered or corrupted")
	}
}

func TestProxyPartition(t *testing.T) {
	p := testserver.ProxyT(t, echoServer(t))
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		return err
	}
	if err := roundTrip(conn); err != nil {
		t.Fatalf("echo via proxy: %v", err)
	}

	p.Partition(true)
	if err := roundTrip(conn); err == nil {
		t.Fatal("existing connection still works during a partition")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		err = roundTrip(c2)
		c2.Close()
	}
	if err == nil {
		t.Fatal("new connection works during a partition")
	}

	p.Partition(false)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3); err != nil {
		t.Fatalf("echo after the partition healed: %v", err)
	}
}

func TestProxyCloseLeavesNoGoroutines(t *testing.T) {
	p, err := servers.StartProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.SetDelay(time.Hour) // forwarders asleep
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("stuck"))
		conns = append(conns, c)
	}
	blocked, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer blocked.Close()
	p.Blackhole(true)
	time.Sleep(50 * time.Millisecond) // let the proxy accept and read

	p.Close()
	p.Close() // idempotent
	// Close waits for every goroutine to call wg.Done; one may still be in
	// its last instruction, so allow a moment for it to vanish (as goleak
	// does), but nothing may stay.
	proxyStacks := func() string {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, fn := range []string{"servers.(*Proxy)", "servers.(*proxyConn)", "servers.sleepUntil"} {
			if strings.Contains(stacks, fn) {
				return stacks
			}
		}
		return ""
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		s := proxyStacks()
		if s == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy goroutines outlived Close:\n%s", s)
		}
	}
	conns[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("client connection still open after Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepting after Close")
	}
}
