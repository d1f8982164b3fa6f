package legacysetnx

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

// checkTTL refuses an Options.TTL outside Unit.TTLRange().
func (o *Options) checkTTL() error {
	if o.TTL == 0 {
		return nil
	}
	if err := o.Unit.checkTTL(o.TTL); err != nil {
		return fmt.Errorf("legacysetnx: Options.TTL: %w", err)
	}
	return nil
}
