package rueidis

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient"
)

var _ redisclient.Subscriber = (*adapter)(nil)

// Subscribe implements [redisclient.Subscriber] on a dedicated connection
// of the client (rueidis.Client.Dedicate) with Pub/Sub hooks: rueidis
// calls them from its own goroutine, and tells through their error
// channel when the connection broke, after which this subscribes again on
// a new dedicated connection until Close.
func (a *adapter) Subscribe(ctx context.Context, channel string, deliver func(payload string)) (io.Closer, error) {
	s := &rueidisSub{c: a.c, channel: channel, deliver: deliver, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	dc, errs, err := s.subscribeBounded(ctx)
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.dc = dc
	go s.run(dc, errs)
	return s, nil
}

type rueidisSub struct {
	c       rueidis.Client
	channel string
	deliver func(string)
	ctx     context.Context // ended by Close
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	once    sync.Once
	mu      sync.Mutex
	dc      rueidis.DedicatedClient // the current connection
}

// subscribe takes a dedicated connection, sets the hooks and subscribes,
// waiting for the confirmation within ctx.
func (s *rueidisSub) subscribe(ctx context.Context) (rueidis.DedicatedClient, <-chan error, error) {
	dc, release := s.c.Dedicate()
	confirmed := make(chan struct{}, 1)
	errs := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) { s.deliver(m.Message) },
		OnSubscription: func(ps rueidis.PubSubSubscription) {
			if ps.Kind == "subscribe" {
				select {
				case confirmed <- struct{}{}:
				default:
				}
			}
		},
	})
	fail := func(err error) (rueidis.DedicatedClient, <-chan error, error) {
		dc.Close()
		release()
		return nil, nil, fmt.Errorf("rueidis: subscribe: %w", replyErr(err))
	}
	if err := dc.Do(ctx, dc.B().Subscribe().Channel(s.channel).Build()).Error(); err != nil {
		return fail(err)
	}
	select {
	case <-confirmed:
		return dc, errs, nil
	case err := <-errs:
		if err == nil {
			err = fmt.Errorf("connection closed")
		}
		return fail(err)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// subscribeBounded is subscribe, returning when ctx ends even while
// rueidis still dials (its dial obeys its own timeout, not ctx): the
// late connection is then closed as soon as it is made.
func (s *rueidisSub) subscribeBounded(ctx context.Context) (rueidis.DedicatedClient, <-chan error, error) {
	type result struct {
		dc   rueidis.DedicatedClient
		errs <-chan error
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		dc, errs, err := s.subscribe(ctx)
		ch <- result{dc, errs, err}
	}()
	select {
	case r := <-ch:
		return r.dc, r.errs, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				r.dc.Close()
				for range r.errs {
				}
			}
		}()
		return nil, nil, fmt.Errorf("rueidis: subscribe: %w", ctx.Err())
	}
}

// run waits for the connection to break and subscribes again, until Close.
func (s *rueidisSub) run(dc rueidis.DedicatedClient, errs <-chan error) {
	defer close(s.done)
	backoff := 50 * time.Millisecond
	for {
		for range errs {
		}
		// The hooks will not be called any more.
		dc.Close()
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
			ndc, nerrs, err := s.subscribeBounded(ctx)
			cancel()
			if err != nil {
				continue
			}
			s.mu.Lock()
			if s.ctx.Err() != nil {
				s.mu.Unlock()
				ndc.Close()
				for range nerrs {
				}
				return
			}
			s.dc = ndc
			s.mu.Unlock()
			dc, errs, backoff = ndc, nerrs, 50*time.Millisecond
			break
		}
	}
}

// Close ends the subscription and waits for its goroutine.
func (s *rueidisSub) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.cancel()
		dc := s.dc
		s.mu.Unlock()
		dc.Close()
	})
	<-s.done
	return nil
}
