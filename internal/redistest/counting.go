package redistest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
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

// CheckContended checks that attempts on key, held by another owner, cost
// perAttempt requests each by requests (one per server): a TryAcquire,
// and an Acquire of three attempts, both failing with ErrHeld.
func CheckContended(t *testing.T, lk lockswap.Locker, key string, requests func() int64, perAttempt int64) {
	t.Helper()
	ctx := context.Background()
	before := requests()
	if _, err := lk.TryAcquire(ctx, key); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire on a held key: %v, want ErrHeld", err)
	}
	if n := requests() - before; n != perAttempt {
		t.Errorf("TryAcquire on a held key sent %d requests, want %d", n, perAttempt)
	}
	const attempts = 3
	before = requests()
	_, err := lk.Acquire(ctx, key, lockswap.WithRetry(lockswap.LimitedRetry(time.Millisecond, attempts)))
	if !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("Acquire of %d attempts on a held key: %v, want ErrHeld", attempts, err)
	}
	if n := requests() - before; n != attempts*perAttempt {
		t.Errorf("Acquire of %d attempts on a held key sent %d requests, want %d", attempts, n, attempts*perAttempt)
	}
}

// CheckNotLock checks that an attempt on key, which holds a hash, fails
// with ErrInvalid whose message contains say, after want requests by
// requests. (That the hash is left untouched is the caller's to check.)
func CheckNotLock(t *testing.T, lk lockswap.Locker, key, say string, requests func() int64, want int64) {
	t.Helper()
	before := requests()
	_, err := lk.TryAcquire(context.Background(), key)
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), say) {
		t.Errorf("TryAcquire on a key holding a hash: %v, want ErrInvalid saying %q", err, say)
	}
	if n := requests() - before; n != want {
		t.Errorf("TryAcquire on a key holding a hash sent %d requests, want %d", n, want)
	}
}
