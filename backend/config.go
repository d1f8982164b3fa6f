// Package backend opens any lockswap backend from configuration: a URL, a
// JSON-tagged Config, or an environment variable, so that an application
// switches backends by changing configuration and nothing else.
//
//	singleredis://[user:password@]host:port[/db]?ttl=10s&prefix=app:&fence=true
//	singlerediss://...?tls_ca=/etc/ca.pem    (TLS; also redlocks://, legacysetnxs://)
//	redlock://host1:6379,host2:6379,host3:6379?ttl=10s&drift=0.01
//	legacysetnx://host:6379?prefix=lock.&unit=s
//	etcd://host1:2379,host2:2379?prefix=/locks/&ttl=10s   (etcdlease:// too; etcds:// for TLS)
//	migrate://?phase=dual&legacy=<url>&target=<url>
//	memlock://?store=tests&ttl=10s           (in-process, for tests)
//
// Every Redis scheme takes client=goredis|redigo|rueidis. Any scheme takes
// require=fencing,failover,... (lockswap.Property names): opening a backend
// whose Guarantees lack one fails with an error naming it. docs/configuration.md
// lists every parameter.
//
// Each backend parses and checks its own parameters and registers its
// scheme with package registry; this package imports every built-in
// backend and every Redis client, and routes to them. A program that wants
// to link only one backend and one client imports those and opens URLs with
// registry.OpenURL instead.
package backend

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/registry"
)

// The backend names, as in URL schemes and Config.Backend.
const (
	SingleRedis = "singleredis"
	Redlock     = "redlock"
	LegacySetNX = "legacysetnx"
	Etcd        = "etcd" // etcdlease; EtcdLease is the same backend
	EtcdLease   = "etcdlease"
	Migrate     = "migrate"
)

// Duration is a time.Duration that reads and writes JSON as "10s".
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "10s" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration %s: want a string such as \"10s\": %w", b, lockswap.ErrInvalid)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %v: %w", s, err, lockswap.ErrInvalid)
	}
	*d = Duration(v)
	return nil
}

// Config selects and configures one backend. The zero value of each field
// means the backend's default.
type Config struct {
	// Backend is singleredis, redlock, legacysetnx, etcd (or etcdlease),
	// migrate, or a scheme another package registered (package registry).
	Backend string `json:"backend"`
	// Addrs are host:port pairs: one for singleredis and legacysetnx, N (odd,
	// at least 3) independent masters for redlock, etcd endpoints for etcd.
	Addrs []string `json:"addrs,omitempty"`
	// Username and Password authenticate to Redis (ACL) or etcd. Never
	// printed: String and errors redact them.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// DB is the Redis database number.
	DB int `json:"db,omitempty"`
	// TLS connects with TLS (the "s" schemes). The server's certificate
	// is always verified.
	TLS bool `json:"tls,omitempty"`
	// TLSCA is a PEM file of the CA certificates that verify the server,
	// instead of the system roots (tls_ca=). TLS only.
	TLSCA string `json:"tls_ca,omitempty"`
	// TLSCert and TLSKey are PEM files of a client certificate and its key
	// (tls_cert=, tls_key=), both or neither. TLS only.
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// TLSServerName is the name the server's certificate must carry when
	// it is not the host in Addrs (tls_server_name=). TLS only.
	TLSServerName string `json:"tls_server_name,omitempty"`
	// Client is the Redis client library: goredis (default), redigo or
	// rueidis.
	Client string `json:"client,omitempty"`
	// TTL is the default lock TTL of the opened Locker.
	TTL Duration `json:"ttl,omitempty"`
	// Prefix is prepended to every lock key.
	Prefix string `json:"prefix,omitempty"`
	// Fence enables the fencing counter of singleredis and redlock
	// (Lock.Fence; see docs/redlock-fencing.md for redlock's protocol).
	Fence bool `json:"fence,omitempty"`
	// Drift is Redlock's clock drift factor (default 0.01).
	Drift float64 `json:"drift,omitempty"`
	// RestartSafety makes Redlock ignore a restarted instance's votes until
	// MaxTTL has passed since its restart.
	RestartSafety bool     `json:"restart_safety,omitempty"`
	MaxTTL        Duration `json:"max_ttl,omitempty"`
	// Unit is legacysetnx's timestamp unit, required: s or ms (see
	// legacysetnx.ParseUnit for the spellings and legacysetnx.UnitHelp for
	// how to find out which the old clients write).
	Unit string `json:"unit,omitempty"`
	// ServerTime makes legacysetnx take time from the Redis server.
	ServerTime bool `json:"server_time,omitempty"`
	// RedisExpiry makes legacysetnx also set a Redis expiry on its keys.
	RedisExpiry bool `json:"redis_expiry,omitempty"`
	// DialTimeout bounds connecting.
	DialTimeout Duration `json:"dial_timeout,omitempty"`
	// Require lists properties the backend must have (lockswap.Property).
	Require []string `json:"require,omitempty"`
	// Phase, Legacy, Target and LegacyNet configure the migrate backend.
	Phase     string  `json:"phase,omitempty"`
	Legacy    *Config `json:"legacy,omitempty"`
	Target    *Config `json:"target,omitempty"`
	LegacyNet bool    `json:"legacy_net,omitempty"`
	// Params are the parameters of a backend registered by another
	// package that have no field here.
	Params map[string]string `json:"params,omitempty"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("backend: "+format+": %w", append(args, lockswap.ErrInvalid)...)
}

// ParseURL parses a backend URL into a Config and validates it. Errors
// match lockswap.ErrInvalid, name the parameter at fault, and never contain
// the password.
func ParseURL(raw string) (Config, error) {
	u, err := registry.ParseURL(raw)
	if err != nil {
		return Config{}, fmt.Errorf("backend: %w", err)
	}
	return fromURL(u)
}

// fromURL turns a checked URL into a Config.
func fromURL(u *registry.URL) (Config, error) {
	c := Config{Backend: u.Scheme, TLS: u.TLS, Username: u.Username, Password: u.Password, Addrs: u.Hosts}
	if u.Scheme == "redis" {
		c.Backend = SingleRedis
	}
	if u.Path != "" {
		db, err := u.DB()
		if err != nil {
			return Config{}, fmt.Errorf("backend: %w", err)
		}
		c.DB = db
	}
	for k, vs := range u.Query {
		if err := c.set(k, vs[0]); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// fields returns the fields of c that hold one URL parameter each, by
// the parameter's name (also the field's JSON name): the one place that
// maps parameters to fields, both ways (set, query).
func (c *Config) fields() map[string]any {
	return map[string]any{
		"ttl": &c.TTL, "max_ttl": &c.MaxTTL, "dial_timeout": &c.DialTimeout,
		"prefix": &c.Prefix, "client": &c.Client, "unit": &c.Unit, "phase": &c.Phase,
		"fence": &c.Fence, "restart_safety": &c.RestartSafety, "server_time": &c.ServerTime,
		"redis_expiry": &c.RedisExpiry, "legacy_net": &c.LegacyNet,
		"drift":  &c.Drift,
		"tls_ca": &c.TLSCA, "tls_cert": &c.TLSCert, "tls_key": &c.TLSKey, "tls_server_name": &c.TLSServerName,
	}
}

// set sets the field of parameter k, from a URL its backend has checked.
func (c *Config) set(k, v string) error {
	if f, ok := c.fields()[k]; ok {
		switch f := f.(type) {
		case *Duration:
			d, _ := time.ParseDuration(v)
			*f = Duration(d)
		case *string:
			*f = v
		case *bool:
			*f, _ = strconv.ParseBool(v)
		case *float64:
			*f, _ = strconv.ParseFloat(v, 64)
		}
		return nil
	}
	switch k {
	case "require":
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				c.Require = append(c.Require, p)
			}
		}
	case "legacy", "target":
		su, err := registry.ParseURL(v)
		if err != nil {
			return fmt.Errorf("backend: parameter %s: %w", k, err)
		}
		sub, err := fromURL(su)
		if err != nil {
			return fmt.Errorf("backend: parameter %s: %w", k, err)
		}
		if k == "legacy" {
			c.Legacy = &sub
		} else {
			c.Target = &sub
		}
	default:
		if c.Params == nil {
			c.Params = map[string]string{}
		}
		c.Params[k] = v
	}
	return nil
}

// Validate checks a Config (from JSON or ParseURL) the way its backend
// checks a URL. Errors match lockswap.ErrInvalid and name the field at
// fault.
func (c Config) Validate() error {
	if err := registry.Check(c.url(), registry.Clients{}); err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	return nil
}

// url returns c as a registry URL, with its password.
func (c Config) url() *registry.URL {
	u := &registry.URL{Scheme: c.Backend, TLS: c.TLS, Username: c.Username, Password: c.Password,
		Hosts: c.Addrs, Query: c.query(false)}
	if c.DB != 0 {
		u.Path = strconv.Itoa(c.DB)
	}
	return u
}

// query returns c's parameters; with redact, the URLs of legacy= and
// target= have their passwords replaced.
func (c Config) query(redact bool) url.Values {
	q := url.Values{}
	for k, f := range c.fields() {
		var v string
		switch f := f.(type) {
		case *Duration:
			if *f != 0 {
				v = time.Duration(*f).String()
			}
		case *string:
			v = *f
		case *bool:
			if *f {
				v = "true"
			}
		case *float64:
			if *f != 0 {
				v = strconv.FormatFloat(*f, 'g', -1, 64)
			}
		}
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(c.Require) > 0 {
		q.Set("require", strings.Join(c.Require, ","))
	}
	for name, sub := range map[string]*Config{"legacy": c.Legacy, "target": c.Target} {
		if sub == nil {
			continue
		}
		if redact {
			q.Set(name, sub.String())
		} else {
			q.Set(name, sub.url().Unredacted())
		}
	}
	for k, v := range c.Params {
		if !q.Has(k) {
			q.Set(k, v)
		}
	}
	return q
}

// GoString renders the Config for %#v as String does, so that a debug
// print of a Config (or of a struct holding one) does not show the
// password.
func (c Config) GoString() string { return "backend.Config(" + strconv.Quote(c.String()) + ")" }

// String renders the Config as a URL with the password replaced by "xxxxx".
func (c Config) String() string {
	u := c.url()
	u.Query = c.query(true)
	return u.String()
}
