// Package backend opens any lockswap backend from configuration: a URL, a
// JSON-tagged Config, or an environment variable, so that an application
// switches backends by changing configuration and nothing else.
//
//	singleredis://[user:password@]host:port[/db]?ttl=10s&prefix=app:&fence=true
//	singlerediss://...                       (TLS; also redlocks://, legacysetnxs://)
//	redlock://host1:6379,host2:6379,host3:6379?ttl=10s&drift=0.01
//	legacysetnx://host:6379?prefix=lock.&unit=s
//	etcd://host1:2379,host2:2379?prefix=/locks/&ttl=10s   (etcds:// for TLS)
//	migrate://?phase=dual&legacy=<url>&target=<url>
//
// Every Redis scheme takes client=goredis|redigo. Any scheme takes
// require=fencing,failover,... (lockswap.Property names): opening a backend
// whose Guarantees lack one fails with an error naming it. docs/configuration.md
// lists every parameter.
package backend

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
)

// The backend names, as in URL schemes and Config.Backend.
const (
	SingleRedis = "singleredis"
	Redlock     = "redlock"
	LegacySetNX = "legacysetnx"
	Etcd        = "etcd"
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
	// Backend is singleredis, redlock, legacysetnx, etcd or migrate.
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
	// TLS connects with TLS (the "s" schemes).
	TLS bool `json:"tls,omitempty"`
	// Client is the Redis client library: goredis (default) or redigo.
	Client string `json:"client,omitempty"`
	// TTL is the default lock TTL of the opened Locker.
	TTL Duration `json:"ttl,omitempty"`
	// Prefix is prepended to every lock key.
	Prefix string `json:"prefix,omitempty"`
	// Fence enables singleredis's fencing counter.
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
}

// params lists, per backend, the URL query parameters it accepts.
var params = map[string][]string{
	SingleRedis: {"ttl", "prefix", "fence", "client", "dial_timeout", "require"},
	Redlock:     {"ttl", "prefix", "drift", "client", "dial_timeout", "require", "restart_safety", "max_ttl"},
	LegacySetNX: {"ttl", "prefix", "unit", "client", "dial_timeout", "require", "server_time", "redis_expiry"},
	Etcd:        {"ttl", "prefix", "dial_timeout", "require"},
	Migrate:     {"phase", "legacy", "target", "legacy_net", "ttl", "require"},
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("backend: "+format+": %w", append(args, lockswap.ErrInvalid)...)
}

// ParseURL parses a backend URL into a Config and validates it. Errors
// match lockswap.ErrInvalid, name the parameter at fault, and never contain
// the password.
func ParseURL(raw string) (Config, error) {
	var c Config
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return c, invalid("%q is not a backend URL (want scheme://...)", redactRaw(raw))
	}
	scheme = strings.ToLower(scheme)
	c.Backend = scheme
	if _, known := params[scheme]; !known && strings.HasSuffix(scheme, "s") {
		if _, known := params[strings.TrimSuffix(scheme, "s")]; known {
			c.Backend, c.TLS = strings.TrimSuffix(scheme, "s"), true
		}
	}
	if scheme == "rediss" || scheme == "redis" {
		c.Backend, c.TLS = SingleRedis, scheme == "rediss"
	}
	allowed, known := params[c.Backend]
	if !known {
		return Config{}, invalid("unknown scheme %q (want singleredis, redlock, legacysetnx, etcd or migrate, with an s suffix for TLS)", scheme)
	}
	// Split authority, path and query by hand: net/url rejects the comma
	// separated host lists that redlock and etcd URLs use.
	authority, query, _ := strings.Cut(rest, "?")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		// Credentials end at the last "@" before the query, so that a "/"
		// in a password does not leak into the path.
		userinfo := authority[:at]
		authority = authority[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if c.Username, err = url.PathUnescape(user); err != nil {
			return Config{}, invalid("username is not valid percent-encoding")
		}
		if hasPass {
			if c.Password, err = url.PathUnescape(pass); err != nil {
				return Config{}, invalid("password is not valid percent-encoding") // the password itself is not repeated
			}
		}
	}
	authority, path, _ := strings.Cut(authority, "/")
	if authority != "" {
		for _, h := range strings.Split(authority, ",") {
			if err := checkHostPort(h); err != nil {
				return Config{}, err
			}
			c.Addrs = append(c.Addrs, h)
		}
	}
	if path != "" {
		if c.Backend == Etcd || c.Backend == Migrate {
			return Config{}, invalid("%s URLs take no path (got /%s); use prefix=", c.Backend, path)
		}
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return Config{}, invalid("database %q in the path is not a non-negative number", path)
		}
		c.DB = db
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Config{}, invalid("query: %v", err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(allowed, k) {
			return Config{}, invalid("unknown parameter %q for %s (known: %s)", k, c.Backend, strings.Join(allowed, ", "))
		}
		if len(q[k]) != 1 {
			return Config{}, invalid("parameter %q given %d times", k, len(q[k]))
		}
		if err := c.set(k, q[k][0]); err != nil {
			return Config{}, err
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func checkHostPort(h string) error {
	host, port, err := net.SplitHostPort(h)
	if err != nil || host == "" {
		return invalid("address %q: want host:port", h)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return invalid("address %q: port %q is not a number between 1 and 65535", h, port)
	}
	return nil
}

func (c *Config) set(k, v string) error {
	parseBool := func() (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, invalid("parameter %s=%q: want true or false", k, v)
		}
		return b, nil
	}
	parseDur := func() (Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, invalid("parameter %s=%q: want a positive duration such as 10s or 500ms", k, v)
		}
		return Duration(d), nil
	}
	var err error
	switch k {
	case "ttl":
		c.TTL, err = parseDur()
	case "max_ttl":
		c.MaxTTL, err = parseDur()
	case "dial_timeout":
		c.DialTimeout, err = parseDur()
	case "prefix":
		c.Prefix = v
	case "fence":
		c.Fence, err = parseBool()
	case "restart_safety":
		c.RestartSafety, err = parseBool()
	case "server_time":
		c.ServerTime, err = parseBool()
	case "redis_expiry":
		c.RedisExpiry, err = parseBool()
	case "legacy_net":
		c.LegacyNet, err = parseBool()
	case "client":
		c.Client = v
	case "unit":
		c.Unit = v
	case "phase":
		c.Phase = v
	case "drift":
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil {
			return invalid("parameter drift=%q: want a number such as 0.01", v)
		}
		c.Drift = f
	case "require":
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				c.Require = append(c.Require, p)
			}
		}
	case "legacy", "target":
		sub, perr := ParseURL(v)
		if perr != nil {
			return fmt.Errorf("backend: parameter %s: %w", k, perr)
		}
		if k == "legacy" {
			c.Legacy = &sub
		} else {
			c.Target = &sub
		}
	}
	return err
}

// Validate checks a Config (from JSON or ParseURL). Errors match
// lockswap.ErrInvalid and name the field at fault.
func (c Config) Validate() error {
	if _, ok := params[c.Backend]; !ok {
		return invalid("unknown backend %q (want singleredis, redlock, legacysetnx, etcd or migrate)", c.Backend)
	}
	if c.TTL < 0 || (c.TTL > 0 && time.Duration(c.TTL) < lockswap.MinTTL) {
		return invalid("ttl %v: want at least %v", time.Duration(c.TTL), lockswap.MinTTL)
	}
	if time.Duration(c.TTL) > lockswap.MaxTTL {
		return invalid("ttl %v: want at most %v", time.Duration(c.TTL), lockswap.MaxTTL)
	}
	for _, a := range c.Addrs {
		if err := checkHostPort(a); err != nil {
			return err
		}
	}
	for _, r := range c.Require {
		if _, err := (lockswap.Guarantees{}).Has(lockswap.Property(r)); err != nil {
			return invalid("require=%s: unknown property (known: %v)", r, lockswap.Properties())
		}
	}
	switch c.Client {
	case "", "goredis", "redigo":
	default:
		return invalid("client=%q: want goredis or redigo", c.Client)
	}
	switch c.Backend {
	case SingleRedis, LegacySetNX:
		if len(c.Addrs) != 1 {
			return invalid("%s needs exactly one host:port, got %d", c.Backend, len(c.Addrs))
		}
	case Redlock:
		if n := len(c.Addrs); n < 3 || n%2 == 0 {
			return invalid("redlock needs an odd number of at least 3 independent masters, got %d hosts", n)
		}
		if !(c.Drift >= 0 && c.Drift < 0.5) { // also NaN, which fails every comparison
			return invalid("drift=%v: want a factor in [0, 0.5) such as 0.01", c.Drift)
		}
		if c.RestartSafety && c.MaxTTL <= 0 {
			return invalid("restart_safety needs max_ttl, the longest TTL any client uses on these masters")
		}
	case Etcd:
		if len(c.Addrs) == 0 {
			return invalid("etcd needs at least one endpoint host:port")
		}
	case Migrate:
		if len(c.Addrs) != 0 {
			return invalid("migrate takes no hosts; give legacy= and target= URLs")
		}
		switch c.Phase {
		case "legacy", "dual", "target":
		case "":
			return invalid("migrate needs phase=legacy|dual|target")
		default:
			return invalid("phase=%q: want legacy, dual or target", c.Phase)
		}
		if c.Legacy != nil && c.Legacy.Backend != LegacySetNX {
			return invalid("migrate legacy= must be a legacysetnx URL, got %s", c.Legacy.Backend)
		}
		if (c.Phase != "target" || c.LegacyNet) && c.Legacy == nil {
			return invalid("migrate phase %s needs legacy=<legacysetnx URL>", c.Phase)
		}
		if c.Phase != "legacy" && c.Target == nil {
			return invalid("migrate phase %s needs target=<backend URL>", c.Phase)
		}
		for name, sub := range map[string]*Config{"legacy": c.Legacy, "target": c.Target} {
			if sub == nil {
				continue
			}
			if sub.Backend == Migrate {
				return invalid("migrate %s= cannot itself be a migrate URL", name)
			}
			if sub.TTL != 0 {
				return invalid("migrate %s= has its own ttl; give ttl= once, on the migrate URL", name)
			}
			if err := sub.Validate(); err != nil {
				return fmt.Errorf("backend: migrate %s=: %w", name, err)
			}
		}
	}
	if c.Backend != LegacySetNX {
		if c.Unit != "" || c.ServerTime || c.RedisExpiry {
			return invalid("unit, server_time and redis_expiry are legacysetnx parameters, not %s", c.Backend)
		}
	}
	if err := validateLegacySetNX(c); err != nil {
		return err
	}
	if c.Fence && c.Backend != SingleRedis {
		return invalid("fence is a singleredis parameter (etcd always fences), not %s", c.Backend)
	}
	return nil
}

// String renders the Config as a URL with the password replaced by "xxxxx".
func (c Config) String() string {
	var b strings.Builder
	b.WriteString(c.Backend)
	if c.TLS {
		b.WriteString("s")
	}
	b.WriteString("://")
	if c.Username != "" || c.Password != "" {
		b.WriteString(url.PathEscape(c.Username))
		if c.Password != "" {
			b.WriteString(":xxxxx")
		}
		b.WriteString("@")
	}
	b.WriteString(strings.Join(c.Addrs, ","))
	if c.DB != 0 {
		fmt.Fprintf(&b, "/%d", c.DB)
	}
	q := url.Values{}
	setIf := func(k, v string, ok bool) {
		if ok {
			q.Set(k, v)
		}
	}
	setIf("ttl", time.Duration(c.TTL).String(), c.TTL != 0)
	setIf("prefix", c.Prefix, c.Prefix != "")
	setIf("fence", "true", c.Fence)
	setIf("client", c.Client, c.Client != "")
	setIf("drift", strconv.FormatFloat(c.Drift, 'g', -1, 64), c.Drift != 0)
	setIf("restart_safety", "true", c.RestartSafety)
	setIf("max_ttl", time.Duration(c.MaxTTL).String(), c.MaxTTL != 0)
	setIf("unit", c.Unit, c.Unit != "")
	setIf("server_time", "true", c.ServerTime)
	setIf("redis_expiry", "true", c.RedisExpiry)
	setIf("dial_timeout", time.Duration(c.DialTimeout).String(), c.DialTimeout != 0)
	setIf("require", strings.Join(c.Require, ","), len(c.Require) > 0)
	setIf("phase", c.Phase, c.Phase != "")
	setIf("legacy_net", "true", c.LegacyNet)
	if c.Legacy != nil {
		q.Set("legacy", c.Legacy.String())
	}
	if c.Target != nil {
		q.Set("target", c.Target.String())
	}
	if len(q) > 0 {
		b.WriteString("?")
		b.WriteString(q.Encode())
	}
	return b.String()
}

// redactRaw hides anything between "://" and "@" in an unparsed URL.
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			return "xxxxx" + raw[at:]
		}
		return raw
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://xxxxx" + rest[at:]
	}
	return raw
}
