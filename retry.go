package lockswap

import (
	"math/rand/v2"
	"time"
)

// RetryStrategy decides how long Acquire waits before its next attempt.
// Implementations are stateless and safe for concurrent use: the attempt
// number (1 after the first failed attempt) is passed in.
type RetryStrategy interface {
	// NextDelay returns the delay before attempt+1, or false to give up.
	NextDelay(attempt int) (time.Duration, bool)
}

type noRetry struct{}

func (noRetry) NextDelay(int) (time.Duration, bool) { return 0, false }

// NoRetry gives up after the first attempt.
func NoRetry() RetryStrategy { return noRetry{} }

type constantRetry struct {
	delay time.Duration
	max   int
}

func (c constantRetry) NextDelay(attempt int) (time.Duration, bool) {
	if c.max > 0 && attempt >= c.max {
		return 0, false
	}
	return c.delay, true
}

// ConstantRetry waits delay between attempts, until the context ends.
func ConstantRetry(delay time.Duration) RetryStrategy { return constantRetry{delay: delay} }

// LimitedRetry waits delay between attempts and gives up after attempts
// attempts in all.
func LimitedRetry(delay time.Duration, attempts int) RetryStrategy {
	if attempts < 1 {
		attempts = 1
	}
	return constantRetry{delay: delay, max: attempts}
}

type jitterRetry struct{ min, max time.Duration }

func (j jitterRetry) NextDelay(int) (time.Duration, bool) {
	if j.max <= j.min {
		return j.min, true
	}
	return j.min + rand.N(j.max-j.min), true
}

// JitterRetry waits a uniformly random delay in [min, max) between attempts,
// until the context ends. The randomness desynchronises competing clients
// (the Redlock retry rule).
func JitterRetry(min, max time.Duration) RetryStrategy { return jitterRetry{min: min, max: max} }

type backoff struct{ base, cap time.Duration }

func (b backoff) NextDelay(attempt int) (time.Duration, bool) {
	if attempt < 1 {
		attempt = 1
	}
	d := b.cap
	if attempt < 63 {
		if exp := b.base << (attempt - 1); exp > 0 && exp < b.cap {
			d = exp
		}
	}
	if d <= 0 {
		return 0, true
	}
	// Full jitter: uniform in [0, d], so competing clients spread out.
	return rand.N(d + 1), true
}

// BackoffRetry waits a random delay in [0, min(cap, base*2^(attempt-1))]
// between attempts (exponential backoff with "full jitter"), until the
// context ends.
func BackoffRetry(base, cap time.Duration) RetryStrategy {
	if cap < base {
		cap = base
	}
	return backoff{base: base, cap: cap}
}

// ExponentialBackoff is the former name of [BackoffRetry].
//
// Deprecated: use BackoffRetry, which names the retry strategies as one
// family (NoRetry, ConstantRetry, LimitedRetry, JitterRetry, BackoffRetry).
func ExponentialBackoff(base, cap time.Duration) RetryStrategy { return BackoffRetry(base, cap) }
