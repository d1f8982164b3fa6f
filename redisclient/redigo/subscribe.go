package redigo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/lockswap/lockswap/redisclient"
)

var _ redisclient.Subscriber = (*redigo)(nil)

// Subscribe implements [redisclient.Subscriber] on a connection dialled by
// the pool's Dial (or DialContext) function, outside the pool: a
// subscribed connection can serve nothing else, and closing it must end
// the goroutine that reads it at once.
func (r *redigo) Subscribe(ctx context.Context, channel string, deliver func(payload string)) (io.Closer, error) {
	s := &redigoSub{pool: r.pool, channel: channel, deliver: deliver, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	c, err := s.subscribe(ctx)
	if err != nil {
		return nil, err
	}
	s.conn = c
	go s.run(c)
	return s, nil
}

type redigoSub struct {
	pool    *redis.Pool
	channel string
	deliver func(string)
	ctx     context.Context // ended by Close
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	once    sync.Once
	mu      sync.Mutex
	conn    redis.Conn // the current connection; nil while reconnecting
}

// dial opens a connection of the subscription's own.
func (s *redigoSub) dial(ctx context.Context) (redis.Conn, error) {
	switch {
	case s.pool.DialContext != nil:
		return s.pool.DialContext(ctx)
	case s.pool.Dial != nil:
		return s.pool.Dial()
	}
	return nil, errors.New("redigo: the pool has neither Dial nor DialContext")
}

// subscribe dials, subscribes and waits for the confirmation, within ctx.
func (s *redigoSub) subscribe(ctx context.Context) (redis.Conn, error) {
	c, err := s.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("redigo: subscribe: dial: %w", redigoErr(err))
	}
	ps := redis.PubSubConn{Conn: c}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := ps.Subscribe(s.channel); err != nil {
		c.Close()
		return nil, fmt.Errorf("redigo: subscribe: %w", redigoErr(err))
	}
	timeout := time.Duration(0)
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	switch v := ps.ReceiveWithTimeout(timeout).(type) {
	case redis.Subscription:
		return c, nil
	case error:
		c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("redigo: subscribe: %w", ctx.Err())
		}
		return nil, fmt.Errorf("redigo: subscribe: %w", redigoErr(v))
	default:
		c.Close()
		return nil, fmt.Errorf("redigo: subscribe: unexpected reply %T", v)
	}
}

// run reads messages until Close, reconnecting when the connection breaks.
func (s *redigoSub) run(c redis.Conn) {
	defer close(s.done)
	backoff := 50 * time.Millisecond
	for {
		ps := redis.PubSubConn{Conn: c}
		for {
			v := ps.ReceiveWithTimeout(0)
			if m, ok := v.(redis.Message); ok {
				s.deliver(string(m.Data))
				backoff = 50 * time.Millisecond
				continue
			}
			if _, ok := v.(error); ok {
				break
			}
		}
		c.Close()
		for {
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, time.Second)
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			nc, err := s.subscribe(ctx)
			cancel()
			if err == nil {
				if !s.setConn(nc) {
					nc.Close()
					return
				}
				c = nc
				break
			}
		}
	}
}

// setConn records c as the current connection, false once Close began.
func (s *redigoSub) setConn(c redis.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.conn = c
	return true
}

// Close ends the subscription and waits for its goroutine.
func (s *redigoSub) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.cancel()
		c := s.conn
		s.mu.Unlock()
		if c != nil {
			c.Close()
		}
	})
	<-s.done
	return nil
}
