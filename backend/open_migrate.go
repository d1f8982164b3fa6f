package backend

import (
	"context"
	"log/slog"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/migrate"
)

func init() {
	openers[Migrate] = func(ctx context.Context, c Config, cl Clients) (lockswap.Locker, error) {
		phase, err := migrate.ParsePhase(c.Phase)
		if err != nil {
			return nil, err
		}
		o := migrate.Options{Phase: phase, LegacyNet: c.LegacyNet}
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
		o.Legacy, o.Target = unwrap(o.Legacy), unwrap(o.Target)
		lk, err := migrate.New(o)
		if err != nil {
			closeAll(o.Legacy, o.Target)
			return nil, err
		}
		return lk, nil
	}
}

// unwrap removes the default-TTL wrapper so that the migration Locker sees
// the backends' own types (Locator); the migrate URL's ttl
// applies to both.
func unwrap(lk lockswap.Locker) lockswap.Locker {
	if w, ok := lk.(*withTTL); ok {
		return w.Locker
	}
	return lk
}

func closeAll(lks ...lockswap.Locker) {
	for _, lk := range lks {
		if lk != nil {
			lk.Close()
		}
	}
}
