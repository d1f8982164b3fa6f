package backend_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
)

// redisClients are the client= values every Redis URL is tested with.
var redisClients = []string{"goredis", "redigo", "rueidis"}

// atOnce bounds a call that must not retry: generous for -race on a busy
// machine, far below the 15 s outage bound a retried one would take.
const atOnce = 3 * time.Second

// fakeServer starts a listener that answers each connection with answer
// (called with the first line the client sent) and returns its address.
func fakeServer(t *testing.T, answer func(c net.Conn, r *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	go func() {
		defer close(conns)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go answer(c, bufio.NewReader(c))
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// openT opens raw, closed at cleanup.
func openT(t *testing.T, raw string) lockswap.Locker {
	t.Helper()
	lk, err := backend.OpenURL(context.Background(), raw)
	if err != nil {
		t.Fatalf("OpenURL(%s): %v", raw, err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// refusedAtOnce checks that TryAcquire and Acquire (with a long context and
// a fast retry policy) of key fail with ErrInvalid, an error containing
// want, without retrying.
func refusedAtOnce(t *testing.T, lk lockswap.Locker, key, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, call := range []string{"TryAcquire", "Acquire"} {
		acq := lk.TryAcquire
		if call == "Acquire" {
			acq = lk.Acquire
		}
		start := time.Now()
		l, err := acq(ctx, key, lockswap.WithRetry(lockswap.ConstantRetry(time.Millisecond)))
		took := time.Since(start)
		if l != nil {
			l.Release(ctx)
		}
		if !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, lockswap.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%v: %s = %.400v, want ErrInvalid (only) saying %q", lk, call, err, want)
		} else if took > atOnce {
			t.Errorf("%v: %s took %v: an error no retry fixes was retried", lk, call, took.Round(time.Millisecond))
		}
	}
}

// TestNoSuchDatabase: a database number the server does not have (/16 on
// a server with 16) is a configuration error on every client: ErrInvalid
// at once, not an outage retried for 15 s.
func TestNoSuchDatabase(t *testing.T) {
	r := testserver.RedisT(t, testserver.RedisOptions{})
	for _, cl := range redisClients {
		refusedAtOnce(t, openT(t, "redis://"+r.Addr()+"/16?client="+cl), "k", "no such database")
	}
}

// TestTLSToPlainTextServer: a rediss:// URL to a server that answers the
// TLS handshake in plain text (here at once, as Redis does when the
// ClientHello happens to hold a newline) is ErrInvalid at once.
func TestTLSToPlainTextServer(t *testing.T) {
	addr := fakeServer(t, func(c net.Conn, r *bufio.Reader) {
		r.ReadByte() // the ClientHello begins
		c.Write([]byte("-ERR unknown command\r\n"))
	})
	for _, cl := range redisClients {
		refusedAtOnce(t, openT(t, "rediss://"+addr+"?client="+cl), "k", "plain text")
	}
}

// okServer answers +OK to every command: a server that is not Redis.
func okServer(c net.Conn, r *bufio.Reader) {
	defer c.Close()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if strings.HasPrefix(line, "*") {
			if _, err := c.Write([]byte("+OK\r\n")); err != nil {
				return
			}
		}
	}
}

// TestServerAnsweringOKToEverything: a server that answers +OK to every
// command is no lock service: on every client (redigo checked no reply and
// took it for contention or a lock) the attempt fails as an outage,
// ErrUnavailable, never ErrHeld and never a lock.
func TestServerAnsweringOKToEverything(t *testing.T) {
	a, b, c := fakeServer(t, okServer), fakeServer(t, okServer), fakeServer(t, okServer)
	for _, cl := range redisClients {
		for _, raw := range []string{
			"redis://" + a + "?client=" + cl,
			"redis://" + a + "?fence=true&client=" + cl,
			"redlock://" + a + "," + b + "," + c + "?client=" + cl,
			"legacysetnx://" + a + "?unit=ms&client=" + cl,
		} {
			lk := openT(t, raw)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			l, err := lk.TryAcquire(ctx, "k")
			cancel()
			if l != nil {
				t.Errorf("%s: TryAcquire took a lock from a server that is not Redis", raw)
				continue
			}
			if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrHeld) || errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("%s: TryAcquire = %.300v, want ErrUnavailable only", raw, err)
			}
		}
	}
}

// TestKeyTooLarge: the Redis backends refuse a key whose Redis key
// (prefix + key) is over redisclient.MaxKeyBytes with ErrInvalid at once,
// naming its length and the limit, and send nothing; a key at the limit
// works.
func TestKeyTooLarge(t *testing.T) {
	rs := []*testserver.Redis{testserver.RedisT(t, testserver.RedisOptions{}), testserver.RedisT(t, testserver.RedisOptions{}), testserver.RedisT(t, testserver.RedisOptions{})}
	hosts := rs[0].Addr() + "," + rs[1].Addr() + "," + rs[2].Addr()
	const prefix = "app:"
	fits := strings.Repeat("k", redisclient.MaxKeyBytes-len(prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, raw := range []string{
		"redis://" + rs[0].Addr() + "?prefix=" + prefix,
		"redis://" + rs[0].Addr() + "?fence=true&prefix=" + prefix,
		"redlock://" + hosts + "?prefix=" + prefix,
		"redlock://" + hosts + "?fence=true&prefix=" + prefix,
		"legacysetnx://" + rs[0].Addr() + "?unit=ms&prefix=" + prefix,
	} {
		lk := openT(t, raw)
		l, err := lk.TryAcquire(ctx, fits, lockswap.WithTTL(10*time.Second))
		if err != nil {
			t.Errorf("%s: a key at the limit: %.300v", raw, err)
		} else if err := l.Release(ctx); err != nil {
			t.Errorf("%s: release of a key at the limit: %.300v", raw, err)
		}
		before := dbSizes(t, rs)
		for _, key := range []string{fits + "k", strings.Repeat("q", 10<<20)} {
			refusedAtOnce(t, lk, key, fmt.Sprintf("is %d bytes, the most is %d", len(prefix)+len(key), redisclient.MaxKeyBytes))
		}
		if after := dbSizes(t, rs); after != before {
			t.Errorf("%s: refused keys changed the servers: keys %v, then %v", raw, before, after)
		}
	}
}

func dbSizes(t *testing.T, rs []*testserver.Redis) [3]int64 {
	t.Helper()
	var n [3]int64
	for i, r := range rs {
		n[i] = redistest.GoRedisClient(t, r.Addr()).DBSize(context.Background()).Val()
	}
	return n
}
