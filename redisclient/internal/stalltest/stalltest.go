// Package stalltest holds the servers the adapters' tests use to stall a
// client's writes: a TCP proxy that stops reading (Proxy.Stall), so that a
// client writing a large command blocks in its write, and a listener that
// accepts connections and never reads or answers (Hung). Only tests import
// it.
package stalltest

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// smallBuffer is the socket receive buffer of the proxy's and the hung
// listener's accepted connections: small, so that a client's write of a
// few megabytes fills the buffers between it and the stalled reader.
const smallBuffer = 4 << 10

// listen listens on a free loopback port with a small receive buffer,
// which the accepted connections inherit.
func listen(t testing.TB) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = setRcvBuf(fd, smallBuffer)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("stalltest: listen: %v", err)
	}
	return ln
}

// Proxy forwards connections to a target. Stall stops it reading and
// writing in both directions, with every connection kept open: a client's
// writes then block once the socket buffers between it and the proxy are
// full (a few megabytes at most on loopback), and no reply comes. Resume
// forwards again, in order, what was held. Its methods are safe for
// concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	running chan struct{} // closed while forwarding; replaced by Stall
	conns   map[net.Conn]struct{}
	closed  bool
	accepts int
}

// Start starts a proxy to target on a free loopback port; the test's
// cleanup closes it and waits for its goroutines.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	running := make(chan struct{})
	close(running)
	p := &Proxy{target: target, ln: listen(t), running: running, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many client connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Stall stops forwarding: nothing more is read from either side.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.running:
		p.running = make(chan struct{})
	default:
	}
}

// Resume forwards again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.running:
	default:
		close(p.running)
	}
}

// Close closes the listener and every connection, and waits for the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.Resume()
	p.wg.Wait()
}

// track records c, or closes it and returns false once the proxy is
// closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		p.mu.Unlock()
		if !p.track(c) {
			return
		}
		u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(u) {
			c.Close()
			return
		}
		p.wg.Add(2)
		go p.copy(u, c)
		go p.copy(c, u)
	}
}

// copy forwards src to dst while running; either side's end closes both.
func (p *Proxy) copy(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 4<<10)
	for {
		p.wait()
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait returns when the proxy forwards (or is closed).
func (p *Proxy) wait() {
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	<-running
}

// HungServer is a listener on a free loopback port that accepts
// connections and never reads from them nor answers: a hung server.
type HungServer struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

// StartHung starts a HungServer; the test's cleanup closes it and its
// connections.
func StartHung(t testing.TB) *HungServer {
	t.Helper()
	h := &HungServer{ln: listen(t)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := h.ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.accepted++
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		h.ln.Close()
		wg.Wait()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			c.Close()
		}
	})
	return h
}

// Addr returns the listener's "127.0.0.1:port".
func (h *HungServer) Addr() string { return h.ln.Addr().String() }

// Accepted returns how many connections it has accepted.
func (h *HungServer) Accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.accepted
}

// Hung starts a [HungServer] and returns its address.
func Hung(t testing.TB) string { return StartHung(t).Addr() }
