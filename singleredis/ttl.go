package singleredis

import (
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
)

// DefaultTTL returns the TTL of an Acquire or TryAcquire without
// lockswap.WithTTL: Options.TTL, or lockswap.DefaultTTL.
func (lk *Locker) DefaultTTL() time.Duration {
	if lk.opts.TTL != 0 {
		return lk.opts.TTL
	}
	return lockswap.DefaultTTL
}

// withTTL puts Options.TTL before a call's options, which win over it.
func (lk *Locker) withTTL(opts []lockswap.Option) []lockswap.Option {
	if lk.opts.TTL == 0 {
		return opts
	}
	return append([]lockswap.Option{lockswap.WithTTL(lk.opts.TTL)}, opts...)
}

// checkTTL refuses an Options.TTL outside [lockswap.MinTTL, lockswap.MaxTTL].
func (o *Options) checkTTL() error {
	if o.TTL == 0 {
		return nil
	}
	if err := lockswap.ValidateTTL(o.TTL); err != nil {
		return fmt.Errorf("singleredis: Options.TTL: %w", err)
	}
	return nil
}
