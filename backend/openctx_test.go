package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
)

// silentServer is a listener on a free loopback port that accepts
// connections and never answers (it reads and drops what it is sent), and
// counts the connections its clients have not closed yet. The hung
// listener of redisclient/internal/stalltest neither reads nor tells when
// a client closes, and is internal to the adapters.
type silentServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

func startSilent(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln, open: map[net.Conn]struct{}{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.open[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() {
				io.Copy(io.Discard, c) // until the client closes (or Cleanup does)
				s.mu.Lock()
				delete(s.open, c)
				s.mu.Unlock()
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *silentServer) Addr() string { return s.ln.Addr().String() }

// Open returns how many accepted connections the clients have not closed.
func (s *silentServer) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// clientGoroutines counts the goroutines running code of the Redis and
// etcd client libraries.
func clientGoroutines() (n int, stacks []string) {
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		if k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, lib := range []string{"github.com/redis/rueidis.", "google.golang.org/grpc.", "google.golang.org/grpc/", "go.etcd.io/etcd/client/"} {
			if strings.Contains(g, lib) {
				stacks = append(stacks, g)
				n++
				break
			}
		}
	}
	return n, stacks
}

// TestOpenURLKeepsContext: opening a backend whose servers never answer,
// or refuse, returns within the context's bound (docs/errors.md, "Time
// bounds"), after its deadline or its cancel, with an error matching the
// context's error and lockswap.ErrUnavailable, and leaves no connection
// open and no goroutine of the client library running. rueidis connects
// when its client is made (5 s per hung server, one after the other for
// redlock's masters); etcd authenticates when its client is made, for
// up to 5 s.
func TestOpenURLKeepsContext(t *testing.T) {
	const password = "s3cretpw"
	refused, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// hung servers, and the URL for their addresses
		hung int
		url  func(addrs []string) string
	}{
		{"singleredis-rueidis", 1, func(a []string) string { return "singleredis://" + a[0] + "?client=rueidis" }},
		{"redlock-rueidis", 3, func(a []string) string { return "redlock://" + strings.Join(a, ",") + "?client=rueidis" }},
		{"etcd-auth", 1, func(a []string) string { return "etcd://u:" + password + "@" + a[0] }},
		{"etcd-auth-refused", 0, func([]string) string { return fmt.Sprintf("etcd://u:%s@127.0.0.1:%d", password, refused[0]) }},
	} {
		for _, kind := range []string{"deadline", "cancel"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				var srvs []*silentServer
				var addrs []string
				for range tc.hung {
					s := startSilent(t)
					srvs = append(srvs, s)
					addrs = append(addrs, s.Addr())
				}
				before, _ := clientGoroutines()
				var (
					ctx    context.Context
					cancel context.CancelFunc
					bound  time.Duration
				)
				if kind == "deadline" {
					bound = 300 * time.Millisecond
					ctx, cancel = context.WithTimeout(context.Background(), bound)
				} else {
					bound = 100 * time.Millisecond
					ctx, cancel = context.WithCancel(context.Background())
					time.AfterFunc(bound, cancel)
				}
				defer cancel()
				probe := conformance.StartLagProbe()
				start := time.Now()
				lk, err := backend.OpenURL(ctx, tc.url(addrs))
				took := time.Since(start)
				probe.Stop()
				if err == nil {
					lk.Close()
					t.Fatalf("OpenURL of servers that never answer returned a Locker under a context that ended")
				}
				if limit := bound + probe.Allowance(); took > limit {
					t.Errorf("OpenURL took %v, want at most %v (the context's %v + %v allowed for scheduling): %v", took, limit, bound, probe.Allowance(), err)
				}
				if !errors.Is(err, ctx.Err()) || !errors.Is(err, lockswap.ErrUnavailable) {
					t.Errorf("OpenURL: %v; want an error matching %v and ErrUnavailable", err, ctx.Err())
				}
				if strings.Contains(err.Error(), password) {
					t.Errorf("the error shows the password: %v", err)
				}
				// What the open made is closed: the servers see every
				// connection closed, and the client library's goroutines
				// end (those closing down within Close's bound).
				t.Logf("OpenURL returned after %v: %v", took, err)
				returned := time.Now()
				deadline := returned.Add(time.Second)
				defer func() { t.Logf("all closed %v after", time.Since(returned)) }()
				for ; ; time.Sleep(time.Millisecond) {
					open := 0
					for _, s := range srvs {
						open += s.Open()
					}
					n, stacks := clientGoroutines()
					if open == 0 && n <= before {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("1 s after OpenURL returned, %d connections are open and %d goroutines of the client run (%d before):\n%s",
							open, n, before, strings.Join(stacks, "\n\n"))
					}
				}
			})
		}
	}
}

// TestOpenGivenEtcdClientKeepsContext: opening etcd with a given client,
// which asks the cluster for its size, returns within the context's bound
// when etcd never answers, with the context's error and ErrUnavailable.
func TestOpenGivenEtcdClientKeepsContext(t *testing.T) {
	s := startSilent(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const bound = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	probe := conformance.StartLagProbe()
	start := time.Now()
	lk, err := backend.Open(ctx, backend.Config{Backend: backend.Etcd}, backend.Clients{Etcd: cli})
	took := time.Since(start)
	probe.Stop()
	if err == nil {
		lk.Close()
		t.Fatal("Open with a given client of an etcd that never answers returned a Locker under a context that ended")
	}
	if limit := bound + probe.Allowance(); took > limit {
		t.Errorf("Open took %v, want at most %v (the context's %v + %v allowed for scheduling): %v", took, limit, bound, probe.Allowance(), err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Errorf("Open: %v; want an error matching context.DeadlineExceeded and ErrUnavailable", err)
	}
}
