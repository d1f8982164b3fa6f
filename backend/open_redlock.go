package backend

import (
	"context"
	"io"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redlock"
)

func init() {
	openers[Redlock] = func(_ context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		rcs, closer, err := redisClients(c, cl)
		if err != nil {
			return nil, err
		}
		o := redlock.Options{Prefix: c.Prefix, TTL: time.Duration(c.TTL), DriftFactor: c.Drift,
			RestartSafety: c.RestartSafety, MaxTTL: time.Duration(c.MaxTTL)}
		if closer != nil {
			o.Closers = []io.Closer{closer}
		}
		lk, err := redlock.New(rcs, o)
		if err != nil && closer != nil {
			closer.Close()
		}
		return lk, err
	}
}
