package redistest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap/redisclient"
)

// Counting wraps a client and counts the requests sent through it, one per
// call (Run counts one: a NOSCRIPT fallback is the adapter's business). It
// hides any optional interface of the wrapped client (redisclient.Splitter):
// every request goes through the counted methods.
type Counting struct {
	redisclient.Client
	n atomic.Int64
}

// Requests returns how many requests were sent so far.
func (c *Counting) Requests() int64 { return c.n.Load() }

// SetNXPX counts the request and passes it on.
func (c *Counting) SetNXPX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	c.n.Add(1)
	return c.Client.SetNXPX(ctx, key, value, ttl)
}

// SetNX counts the request and passes it on.
func (c *Counting) SetNX(ctx context.Context, key, value string) (bool, error) {
	c.n.Add(1)
	return c.Client.SetNX(ctx, key, value)
}

// Get counts the request and passes it on.
func (c *Counting) Get(ctx context.Context, key string) (string, bool, error) {
	c.n.Add(1)
	return c.Client.Get(ctx, key)
}

// GetSet counts the request and passes it on.
func (c *Counting) GetSet(ctx context.Context, key, value string) (string, bool, error) {
	c.n.Add(1)
	return c.Client.GetSet(ctx, key, value)
}

// Del counts the request and passes it on.
func (c *Counting) Del(ctx context.Context, keys ...string) (int64, error) {
	c.n.Add(1)
	return c.Client.Del(ctx, keys...)
}

// Time counts the request and passes it on.
func (c *Counting) Time(ctx context.Context) (time.Time, error) {
	c.n.Add(1)
	return c.Client.Time(ctx)
}

// Run counts the request and passes it on.
func (c *Counting) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	c.n.Add(1)
	return c.Client.Run(ctx, s, keys, args...)
}

// Do counts the request and passes it on.
func (c *Counting) Do(ctx context.Context, args ...any) (any, error) {
	c.n.Add(1)
	return c.Client.Do(ctx, args...)
}
