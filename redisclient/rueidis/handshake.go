package rueidis

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// aLongTimeAgo is a deadline that has passed: a read or write on a
// connection with it fails at once.
var aLongTimeAgo = time.Unix(1, 0)

// watchHandshake returns nc watched by ctx until the server first
// answers on it.
//
// rueidis connects a connection under the command that first needs it
// (PipelineMultiplex connections come up lazily, and a broken one is
// made again under the next command) and runs its handshake (HELLO,
// AUTH, SELECT) itself, with the command's deadline or the dial timeout
// on the socket and no eye on the command's cancellation: a command
// cancelled long before its deadline waited for the handshake of a
// server that did not answer, up to the dial timeout (TestCancelHung
// caught it, one run in five, under a request that landed on the
// client's second connection). When ctx is cancelled before the server
// has answered, the connection's deadline is put in the past and kept
// there: the handshake fails at once, rueidis drops the connection, and
// the command returns. Once the server has answered, the connection is
// rueidis's alone. A context that cannot be cancelled is not watched.
//
// Only the command that makes the connection is watched so: the others
// that land on the connection while it comes up wait for its handshake,
// bounded by that command's context and the dial timeout, as rueidis
// has them do; the adapter sends those from another goroutine (a worker)
// meanwhile (adapter.unwatched), which up, when not nil, ends: it is
// called once, when the server first answers or the connection is
// closed.
func watchHandshake(ctx context.Context, nc net.Conn, up func()) net.Conn {
	if ctx.Done() == nil && up == nil {
		return nc
	}
	w := &handshakeConn{Conn: nc, up: up, stop: func() bool { return false }}
	if ctx.Done() != nil {
		w.stop = context.AfterFunc(ctx, w.cancel)
	}
	return w
}

// handshakeConn is a connection of watchHandshake.
type handshakeConn struct {
	net.Conn
	answered atomic.Bool // the server has answered: nothing is watched any more
	stop     func() bool // stops watching the context
	up       func()      // called once, when the server answered or the connection closed (settle)
	settled  sync.Once

	mu        sync.Mutex // orders cancel against the deadlines rueidis sets
	cancelled bool       // cancelled before an answer: the past deadline stays
	// The deadlines rueidis last set, put back when the answer came
	// after all (read before a cancellation that came meanwhile).
	deadline, readDeadline, writeDeadline time.Time
}

// cancel is called when the context is cancelled.
func (c *handshakeConn) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered.Load() {
		return
	}
	c.cancelled = true
	c.Conn.SetDeadline(aLongTimeAgo)
}

// Read implements [net.Conn]; the first bytes read are the server's
// first answer.
func (c *handshakeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.answered.Load() {
		c.mu.Lock()
		c.answered.Store(true)
		if c.cancelled {
			// The answer was read before the cancellation took effect:
			// the connection is up, and rueidis's own deadlines apply
			// again (a past one would break it for good).
			c.Conn.SetDeadline(c.deadline)
			if !c.readDeadline.IsZero() {
				c.Conn.SetReadDeadline(c.readDeadline)
			}
			if !c.writeDeadline.IsZero() {
				c.Conn.SetWriteDeadline(c.writeDeadline)
			}
		}
		c.mu.Unlock()
		c.settle()
	}
	return n, err
}

// Close implements [net.Conn]: a connection closed before its server
// answered stops watching the context.
func (c *handshakeConn) Close() error {
	c.settle()
	return c.Conn.Close()
}

// settle stops watching the context and calls up, once.
func (c *handshakeConn) settle() {
	c.settled.Do(func() {
		c.stop()
		if c.up != nil {
			c.up()
		}
	})
}

// SetDeadline implements [net.Conn]: a deadline rueidis sets does not
// replace the past one of a cancellation.
func (c *handshakeConn) SetDeadline(t time.Time) error {
	return c.set(t, &c.deadline, c.Conn.SetDeadline)
}

// SetReadDeadline implements [net.Conn], as SetDeadline.
func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	return c.set(t, &c.readDeadline, c.Conn.SetReadDeadline)
}

// SetWriteDeadline implements [net.Conn], as SetDeadline.
func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	return c.set(t, &c.writeDeadline, c.Conn.SetWriteDeadline)
}

// set sets a deadline, and records it in last while the server has not
// answered: after a cancellation it is only recorded.
func (c *handshakeConn) set(t time.Time, last *time.Time, set func(time.Time) error) error {
	if c.answered.Load() {
		return set(t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered.Load() {
		return set(t)
	}
	*last = t
	if c.cancelled {
		return nil
	}
	return set(t)
}
