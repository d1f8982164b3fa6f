package memlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/registry"
)

// The URL of this backend, registered with package registry:
//
//	memlock://?store=name&ttl=10s&log_keys=true
//
// ttl= and log_keys= set the fields of Options of the same names. Lockers
// opened with the same store= (default: the empty name) share one
// Store of this process, so that they exclude each other: a program's own
// tests can run on memlock by configuration alone. This file is all that a
// backend needs beyond its driver to be opened from a URL.
func init() {
	registry.Register(registry.Scheme{
		Name:   "memlock",
		Params: []string{"ttl", "store", "log_keys"},
		Parse:  parseURL,
	})
}

// stores are the Stores of memlock:// URLs, by name, for the life of the
// process.
var stores sync.Map

func parseURL(u *registry.URL, c registry.Clients) (registry.OpenFunc, error) {
	if len(u.Hosts) != 0 {
		return nil, fmt.Errorf("memlock takes no hosts (the store is named by store=): %w", lockswap.ErrInvalid)
	}
	if err := u.NoPath(); err != nil {
		return nil, err
	}
	o, err := urlOptions(u, c)
	if err != nil {
		return nil, err
	}
	name := u.Query.Get("store")
	return func(context.Context) (lockswap.Locker, error) {
		s, _ := stores.LoadOrStore(name, NewStore())
		return NewWithOptions(s.(*Store), o)
	}, nil
}

// urlOptions returns the Options a URL sets: one field per parameter
// (TestURLOptions checks that every field a URL can set has one).
func urlOptions(u *registry.URL, c registry.Clients) (Options, error) {
	o := Options{Logger: c.Logger}
	var err error
	if o.TTL, err = u.TTL(); err != nil {
		return Options{}, err
	}
	if o.LogKeys, err = u.Bool("log_keys"); err != nil {
		return Options{}, err
	}
	return o, nil
}
