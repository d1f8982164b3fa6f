package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	migrate://?phase=dual&legacy=<legacysetnx URL>&target=<backend URL>&legacy_net=true&ttl=10s&log_keys=true
//
// legacy= and target= are URLs of their own, query-escaped; the schemes
// they name must be registered too. ttl= is given once, here: it is the TTL
// of both locks and must suit both backends. log_keys= is Options.LogKeys,
// this Locker's own records; the nested URLs take their own.
func init() {
	registry.Register(registry.Scheme{
		Name:   "migrate",
		Params: []string{"phase", "legacy", "target", "legacy_net", "ttl", "log_keys"},
		Parse:  parseURL,
	})
}

// URL returns the migrate URL of phase over the legacy and target URLs,
// which it percent-encodes, with params added (ttl, legacy_net,
// log_keys): what backend.OpenURL opens. An empty legacy or target is
// left out (the target phase without legacy_net needs no legacy URL, the
// legacy phase no target URL); phase, legacy and target in params are
// ignored, the arguments say them. It checks nothing: opening the URL
// does.
//
//	migrate.URL(migrate.PhaseDual, "legacysetnx://redis:6379?prefix=lock.&unit=s",
//		"singleredis://redis:6379?prefix=locks:&fence=true", url.Values{"ttl": {"10s"}})
func URL(phase Phase, legacy, target string, params url.Values) string {
	q := url.Values{}
	for k, vs := range params {
		q[k] = append([]string(nil), vs...)
	}
	q.Set("phase", phase.String())
	q.Del("legacy")
	q.Del("target")
	if legacy != "" {
		q.Set("legacy", legacy)
	}
	if target != "" {
		q.Set("target", target)
	}
	return "migrate://?" + q.Encode()
}

func parseURL(u *registry.URL, c registry.Clients) (registry.OpenFunc, error) {
	o, legacy, target, err := urlOptions(u, c)
	if err != nil {
		return nil, err
	}
	sub := registry.Clients{TLS: c.TLS, Logger: c.Logger}
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

// urlOptions returns the Options a URL sets, one field per parameter
// (TestURLOptions checks that every field a URL can set has one), and the
// checked URLs of legacy= and target= (nil when absent) that Open opens
// into Options.Legacy and Options.Target.
func urlOptions(u *registry.URL, c registry.Clients) (o Options, legacy, target *registry.URL, err error) {
	if len(u.Hosts) != 0 {
		return o, nil, nil, fmt.Errorf("migrate takes no hosts; give legacy= and target= URLs: %w", lockswap.ErrInvalid)
	}
	if err := u.NoPath(); err != nil {
		return o, nil, nil, err
	}
	switch p := u.Query.Get("phase"); p {
	case "":
		return o, nil, nil, fmt.Errorf("migrate needs phase=legacy|dual|target: %w", lockswap.ErrInvalid)
	default:
		if o.Phase, err = ParsePhase(p); err != nil {
			return o, nil, nil, fmt.Errorf("phase=%q: want legacy, dual or target: %w", p, lockswap.ErrInvalid)
		}
	}
	if o.LegacyNet, err = u.Bool("legacy_net"); err != nil {
		return o, nil, nil, err
	}
	if o.TTL, err = u.TTL(); err != nil {
		return o, nil, nil, err
	}
	if o.LogKeys, err = u.Bool("log_keys"); err != nil {
		return o, nil, nil, err
	}
	sub := registry.Clients{TLS: c.TLS, Logger: c.Logger}
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
				return o, nil, nil, fmt.Errorf("migrate phase %s needs %s=%s: %w", o.Phase, s.name, s.want, lockswap.ErrInvalid)
			}
			continue
		}
		su, err := registry.ParseURL(raw[0])
		if err != nil {
			return o, nil, nil, fmt.Errorf("migrate %s=: %w", s.name, err)
		}
		scheme, _ := registry.Lookup(su.Scheme)
		switch {
		case scheme.Name == "migrate":
			return o, nil, nil, fmt.Errorf("migrate %s= cannot itself be a migrate URL: %w", s.name, lockswap.ErrInvalid)
		case s.name == "legacy" && scheme.Name != "legacysetnx":
			return o, nil, nil, fmt.Errorf("migrate legacy= must be a legacysetnx URL, got %s: %w", su.Scheme, lockswap.ErrInvalid)
		case su.Query.Has("ttl"):
			return o, nil, nil, fmt.Errorf("migrate %s= has its own ttl; give ttl= once, on the migrate URL: %w", s.name, lockswap.ErrInvalid)
		}
		if o.TTL != 0 {
			// The TTL is both locks': each backend checks it is in its range.
			if err := registry.Check(su.WithParam("ttl", o.TTL.String()), sub); err != nil {
				return o, nil, nil, fmt.Errorf("migrate %s=: %w", s.name, err)
			}
		}
		*s.url = su
	}
	o.Logger = c.Logger
	if o.LegacyNet && c.Logger == nil {
		// The safety net finding an old client is worth a warning even
		// without a Logger: on slog's default logger, the key only with
		// log_keys (with a Logger, the Locker writes MsgLegacyNet itself).
		logKeys := o.LogKeys
		o.OnLegacyNet = func(key string) {
			attrs := []any{}
			if logKeys {
				attrs = append(attrs, "key", key)
			}
			slog.Warn("lockswap: live legacy lock found in target phase; an old client is still running", attrs...)
		}
	}
	return o, legacy, target, nil
}
