package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxyQueueLen bounds the chunks buffered per direction; a full queue
// stops reading, so a stalled peer applies back-pressure.
const proxyQueueLen = 64

// Proxy is a TCP proxy on 127.0.0.1 in front of one target address, used to
// simulate a slow instance (SetDelay) or a network partition (Blackhole,
// Partition). Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	delay       time.Duration
	partitioned bool
	blackholed  bool
	unblocked   chan struct{} // closed when the blackhole is lifted
	conns       map[*proxyConn]struct{}
	closed      bool
}

// proxyConn is one client connection and its upstream connection.
type proxyConn struct {
	client, upstream net.Conn
	// upRead and upWritten count the bytes read from the client and
	// written to the target (see Proxy.Pending).
	upRead, upWritten atomic.Int64
	done              chan struct{}
	once              sync.Once
	mu                sync.Mutex
	finished          int // directions that ended cleanly
}

// chunk is data read from one side, due to be written at due.
type chunk struct {
	data []byte
	due  time.Time
}

// StartProxy starts a proxy on a free 127.0.0.1 port that forwards every
// connection to target. Call Close to stop it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("servers: proxy listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		conns:  map[*proxyConn]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the "127.0.0.1:port" address clients should connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetDelay delays every chunk of data by d in each direction, so a
// request/response round trip takes at least 2*d longer. Order is kept.
// Zero removes the delay (for data read from then on).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Blackhole, when on, stops forwarding bytes in both directions while
// keeping every connection open and accepting new ones, which is what a
// network partition looks like to a client: requests time out. Data read
// meanwhile is held, not dropped (as TCP would retransmit it), and is
// delivered in order when Blackhole is turned off.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.blackholed {
		return
	}
	p.blackholed = on
	if on {
		p.unblocked = make(chan struct{})
	} else {
		close(p.unblocked)
	}
}

// Partition, when on, closes every existing connection and closes new ones
// as soon as they are accepted, so clients see resets rather than silence
// (see Blackhole for silence). Turning it off lets new connections through.
func (p *Proxy) Partition(on bool) {
	p.mu.Lock()
	p.partitioned = on
	var conns []*proxyConn
	if on {
		for pc := range p.conns {
			conns = append(conns, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
}

// Close stops the listener, closes all connections and waits for every
// goroutine of the proxy to return. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	for _, pc := range conns {
		pc.close()
	}
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a transient error such as EMFILE
		}
		p.mu.Lock()
		refuse := p.partitioned || p.closed
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// handle dials the target for client c and starts forwarding both ways.
func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	u, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		c.Close()
		return
	}
	pc := &proxyConn{client: c, upstream: u, done: make(chan struct{})}
	p.mu.Lock()
	if p.partitioned || p.closed {
		p.mu.Unlock()
		pc.close()
		return
	}
	p.conns[pc] = struct{}{}
	p.mu.Unlock()

	up := make(chan chunk, proxyQueueLen)
	down := make(chan chunk, proxyQueueLen)
	p.wg.Add(5)
	go p.read(pc, c, up)
	go p.forward(pc, u, up)
	go p.read(pc, u, down)
	go p.forward(pc, c, down)
	go func() {
		defer p.wg.Done()
		<-pc.done
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
}

// read reads chunks from src, stamps each with its due time and queues it.
// The queue is closed at EOF; on any other error the connection is closed.
func (p *Proxy) read(pc *proxyConn, src net.Conn, q chan<- chunk) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if src == pc.client {
				pc.upRead.Add(int64(n))
			}
			p.mu.Lock()
			due := time.Now().Add(p.delay)
			p.mu.Unlock()
			ch := chunk{data: append([]byte(nil), buf[:n]...), due: due}
			select {
			case q <- ch:
			case <-pc.done:
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				close(q)
			} else {
				pc.close()
			}
			return
		}
	}
}

// forward writes queued chunks to dst in order, each no earlier than its due
// time and never while the proxy is blackholed. After the queue is drained
// it half-closes dst, and closes the connection once both directions ended.
func (p *Proxy) forward(pc *proxyConn, dst net.Conn, q <-chan chunk) {
	defer p.wg.Done()
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-q:
		case <-pc.done:
			return
		}
		if !ok {
			if tc, isTCP := dst.(*net.TCPConn); isTCP {
				tc.CloseWrite()
			}
			pc.directionDone()
			return
		}
		if !sleepUntil(ch.due, pc.done) || !p.waitUnblocked(pc.done) {
			return
		}
		if _, err := dst.Write(ch.data); err != nil {
			pc.close()
			return
		}
		if dst == pc.upstream {
			pc.upWritten.Add(int64(len(ch.data)))
		}
	}
}

// Pending returns how many bytes the proxy has read from clients and not
// yet written to the target, on connections still open: while it is above
// zero, a request is held in the proxy (by SetDelay or Blackhole). Data of
// a connection that closed is dropped and no longer counted.
func (p *Proxy) Pending() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for pc := range p.conns {
		n += pc.upRead.Load() - pc.upWritten.Load()
	}
	return n
}

// waitUnblocked waits until the proxy is not blackholed; it returns false
// if done is closed first.
func (p *Proxy) waitUnblocked(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		on, unblocked := p.blackholed, p.unblocked
		p.mu.Unlock()
		if !on {
			return true
		}
		select {
		case <-unblocked:
		case <-done:
			return false
		}
	}
}

// sleepUntil sleeps until t; it returns false if done is closed first.
func sleepUntil(t time.Time, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

// directionDone records a cleanly ended direction and closes the connection
// when both have ended.
func (pc *proxyConn) directionDone() {
	pc.mu.Lock()
	pc.finished++
	both := pc.finished == 2
	pc.mu.Unlock()
	if both {
		pc.close()
	}
}

// close closes both sides and signals the connection's goroutines to stop.
func (pc *proxyConn) close() {
	pc.once.Do(func() {
		close(pc.done)
		pc.client.Close()
		pc.upstream.Close()
	})
}
