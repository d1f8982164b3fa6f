package goredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/redisclient"
)

var _ redisclient.Subscriber = (*goRedis)(nil)

// pubSubber is what *redis.Client, *redis.ClusterClient, *redis.Ring and
// redis.UniversalClient have to subscribe.
type pubSubber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Subscribe implements [redisclient.Subscriber] with the client's own
// Pub/Sub, which holds a connection of its own and reconnects and
// subscribes again after an error.
func (g *goRedis) Subscribe(ctx context.Context, channel string, deliver func(payload string)) (io.Closer, error) {
	c, ok := g.c.(pubSubber)
	if !ok {
		return nil, fmt.Errorf("go-redis: %T cannot subscribe: %w", g.c, errors.ErrUnsupported)
	}
	ps := c.Subscribe(ctx, channel)
	// The first reply is the confirmation (or the error of the dial or
	// of the SUBSCRIBE).
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	v, err := ps.Receive(ctx)
	stop()
	if err == nil {
		if _, ok := v.(*redis.Subscription); !ok {
			err = fmt.Errorf("unexpected reply %T to SUBSCRIBE", v)
		}
	}
	if err != nil {
		ps.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("go-redis: subscribe: %w", goRedisErr(err))
	}
	s := &goRedisSub{ps: ps, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run(deliver)
	return s, nil
}

type goRedisSub struct {
	ps     *redis.PubSub
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
	once   sync.Once
}

// run delivers the messages until Close. After an error the PubSub has
// reconnected and subscribed again, or does so on the next receive.
func (s *goRedisSub) run(deliver func(string)) {
	defer close(s.done)
	backoff := 50 * time.Millisecond
	for {
		m, err := s.ps.ReceiveMessage(s.ctx)
		if err == nil {
			deliver(m.Payload)
			backoff = 50 * time.Millisecond
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// Close ends the subscription and waits for its goroutine.
func (s *goRedisSub) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		err = s.ps.Close()
	})
	<-s.done
	return err
}
