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
//
// go-redis does not watch a context's cancellation while it dials and
// subscribes, and without ContextTimeoutEnabled it ignores the deadline
// too: the subscription is made in a goroutine of its own, and Subscribe
// returns as soon as ctx ends or its deadline passes; a subscription
// abandoned then is closed as soon as go-redis returns it.
func (g *goRedis) Subscribe(ctx context.Context, channel string, deliver func(payload string)) (io.Closer, error) {
	c, ok := g.c.(pubSubber)
	if !ok {
		return nil, fmt.Errorf("go-redis: %T cannot subscribe: %w", g.c, errors.ErrUnsupported)
	}
	type result struct {
		ps  *redis.PubSub
		err error
	}
	var (
		sctx    context.Context
		cancel  context.CancelFunc
		expired <-chan time.Time
	)
	if d, ok := ctx.Deadline(); ok {
		sctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		expired = t.C
	} else {
		sctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	ch := make(chan result, 1)
	go func() {
		defer cancel()
		ps, err := subscribe(sctx, c, channel)
		ch <- result{ps, err}
	}()
	var r result
	select {
	case r = <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("go-redis: subscribe: %w", goRedisErr(r.err))
		}
	case <-ctx.Done():
		r.err = ctx.Err()
	case <-expired:
		r.err = context.DeadlineExceeded
	}
	if r.err != nil {
		// Abandoned: end the attempt (which closes its PubSub once
		// made), and close a subscription that comes all the same.
		cancel()
		go func() {
			if r := <-ch; r.ps != nil {
				r.ps.Close()
			}
		}()
		return nil, fmt.Errorf("go-redis: subscribe: %w", r.err)
	}
	s := &goRedisSub{ps: r.ps, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run(deliver)
	return s, nil
}

// subscribe subscribes c to channel and waits for the confirmation (or
// the error of the dial or of the SUBSCRIBE). When ctx ends first, it
// closes the PubSub and returns ctx's error.
func subscribe(ctx context.Context, c pubSubber, channel string) (*redis.PubSub, error) {
	ps := c.Subscribe(ctx, channel)
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	v, err := ps.Receive(ctx)
	if !stop() {
		// ctx ended: ps is closed.
		return nil, ctx.Err()
	}
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
		return nil, err
	}
	return ps, nil
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
