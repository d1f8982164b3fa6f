package adapt

import (
	"errors"
	"net"
	"sync"
)

// ErrClosed is the error of a dial by a client whose Conns are closed.
var ErrClosed = errors.New("redisclient: client closed")

// Conns records the open connections of a client that a Redis URL opened
// (the adapters' dial.go), so that closing the client closes them first:
// every request in flight then fails at once, whatever its server does,
// and the client library's own Close finds nothing to wait for. Its
// methods are safe for concurrent use.
type Conns struct {
	mu     sync.Mutex
	closed bool
	open   map[*conn]struct{}
}

// Track records nc until it is closed, and returns the connection the
// client should use in its place. After Close it closes nc and returns
// ErrClosed.
func (cs *Conns) Track(nc net.Conn) (net.Conn, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		nc.Close()
		return nil, ErrClosed
	}
	if cs.open == nil {
		cs.open = map[*conn]struct{}{}
	}
	c := &conn{Conn: nc, conns: cs}
	cs.open[c] = struct{}{}
	return c, nil
}

// Closed reports whether Close has been called: a dial can give up
// before it starts.
func (cs *Conns) Closed() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.closed
}

// Close closes every connection recorded and not yet closed, and makes
// Track fail from then on.
func (cs *Conns) Close() {
	cs.mu.Lock()
	cs.closed = true
	open := make([]*conn, 0, len(cs.open))
	for c := range cs.open {
		open = append(open, c)
	}
	cs.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// conn is a connection of Conns, forgotten when closed.
type conn struct {
	net.Conn
	conns *Conns
}

// Close implements [net.Conn].
func (c *conn) Close() error {
	c.conns.mu.Lock()
	delete(c.conns.open, c)
	c.conns.mu.Unlock()
	return c.Conn.Close()
}
