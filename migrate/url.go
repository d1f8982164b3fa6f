package migrate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	migrate://?phase=dual&legacy=<legacysetnx URL>&target=<backend URL>&legacy_net=true&ttl=10s
//
// legacy= and target= are URLs of their own, query-escaped; the schemes
// they name must be registered too. ttl= is given once, here: it is the TTL
// of both locks and must suit both backends.
func init() {
	registry.Register(registry.Scheme{
		Name:   "migrate",
		Params: []string{"phase", "legacy", "target", "legacy_net", "ttl"},
		Parse:  parseURL,
	})
}

func parseURL(u *registry.URL, c registry.Clients) (registry.OpenFunc, error) {
	if len(u.Hosts) != 0 {
		return nil, fmt.Errorf("migrate takes no hosts; give legacy= and target= URLs: %w", lockswap.ErrInvalid)
	}
	if err := u.NoPath(); err != nil {
		return nil, err
	}
	var o Options
	var err error
	switch p := u.Query.Get("phase"); p {
	case "":
		return nil, fmt.Errorf("migrate needs phase=legacy|dual|target: %w", lockswap.ErrInvalid)
	default:
		if o.Phase, err = ParsePhase(p); err != nil {
			return nil, fmt.Errorf("phase=%q: want legacy, dual or target: %w", p, lockswap.ErrInvalid)
		}
	}
	if o.LegacyNet, err = u.Bool("legacy_net"); err != nil {
		return nil, err
	}
	if o.TTL, err = u.TTL(); err != nil {
		return nil, err
	}
	sub := registry.Clients{TLS: c.TLS, Logger: c.Logger}
	var legacy, target *registry.URL
	for _, s := range []struct {
		name string
		url  **registry.URL
		need bool
		want string
	}{
		{"legacy", &legacy, o.Phase != PhaseTarget || o.LegacyNet, "<legacysetnx URL>"},
		{"target", &target, o.Phase != PhaseLegacy, "<backend URL>"},
	} {
		raw, given := u.Query[s.name]
		if !given {
			if s.need {
				return nil, fmt.Errorf("migrate phase %s needs %s=%s: %w", o.Phase, s.name, s.want, lockswap.ErrInvalid)
			}
			continue
		}
		su, err := registry.ParseURL(raw[0])
		if err != nil {
			return nil, fmt.Errorf("migrate %s=: %w", s.name, err)
		}
		scheme, _ := registry.Lookup(su.Scheme)
		switch {
		case scheme.Name == "migrate":
			return nil, fmt.Errorf("migrate %s= cannot itself be a migrate URL: %w", s.name, lockswap.ErrInvalid)
		case s.name == "legacy" && scheme.Name != "legacysetnx":
			return nil, fmt.Errorf("migrate legacy= must be a legacysetnx URL, got %s: %w", su.Scheme, lockswap.ErrInvalid)
		case su.Query.Has("ttl"):
			return nil, fmt.Errorf("migrate %s= has its own ttl; give ttl= once, on the migrate URL: %w", s.name, lockswap.ErrInvalid)
		}
		if o.TTL != 0 {
			// The TTL is both locks': each backend checks it is in its range.
			if err := registry.Check(su.WithParam("ttl", o.TTL.String()), sub); err != nil {
				return nil, fmt.Errorf("migrate %s=: %w", s.name, err)
			}
		}
		*s.url = su
	}
	if o.LegacyNet {
		o.OnLegacyNet = func(key string) {
			slog.Warn("lockswap: live legacy lock found in target phase; an old client is still running", "key", key)
		}
	}
	return func(ctx context.Context) (lockswap.Locker, error) {
		o := o
		closeAll := func() {
			for _, lk := range []lockswap.Locker{o.Legacy, o.Target} {
				if lk != nil {
					lk.Close()
				}
			}
		}
		var err error
		if legacy != nil && (o.Phase != PhaseTarget || o.LegacyNet) {
			if o.Legacy, err = registry.Open(ctx, legacy, sub); err != nil {
				return nil, err
			}
		}
		if target != nil && o.Phase != PhaseLegacy {
			if o.Target, err = registry.Open(ctx, target, sub); err != nil {
				closeAll()
				return nil, err
			}
		}
		lk, err := New(o)
		if err != nil {
			closeAll()
			return nil, err
		}
		return lk, nil
	}, nil
}
