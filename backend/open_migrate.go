package backend

import (
	"context"
	"log/slog"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/migrate"
)

func init() {
	openers[Migrate] = func(ctx context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		phase, err := migrate.ParsePhase(c.Phase)
		if err != nil {
			return nil, err
		}
		o := migrate.Options{Phase: phase, LegacyNet: c.LegacyNet, TTL: time.Duration(c.TTL)}
		if o.LegacyNet {
			o.OnLegacyNet = func(key string) {
				slog.Warn("lockswap: live legacy lock found in target phase; an old client is still running", "key", key)
			}
		}
		needLegacy := phase != migrate.PhaseTarget || c.LegacyNet
		if needLegacy {
			if c.Legacy == nil {
				return nil, invalid("migrate phase %s needs legacy=<legacysetnx URL>", phase)
			}
			if o.Legacy, err = Open(ctx, *c.Legacy, Clients{}); err != nil {
				return nil, err
			}
		}
		if phase != migrate.PhaseLegacy {
			if c.Target == nil {
				closeAll(o.Legacy)
				return nil, invalid("migrate phase %s needs target=<backend URL>", phase)
			}
			if o.Target, err = Open(ctx, *c.Target, Clients{}); err != nil {
				closeAll(o.Legacy)
				return nil, err
			}
		}
		lk, err := migrate.New(o)
		if err != nil {
			closeAll(o.Legacy, o.Target)
			return nil, err
		}
		return lk, nil
	}
}

func closeAll(lks ...lockswap.Locker) {
	for _, lk := range lks {
		if lk != nil {
			lk.Close()
		}
	}
}
