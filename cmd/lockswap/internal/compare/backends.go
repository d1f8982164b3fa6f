package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/redisclient"
	redisadapter "github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/registry"
	_ "github.com/lockswap/lockswap/singleredis" // singleredis:// columns
)

// ErrUsage marks a mistake in the options of Run or Bench (an unknown
// backend, column or scenario, a parameter compare cannot honour); the
// command line turns it into a usage error.
var ErrUsage = errors.New("usage")

// usageMistake is an error matching ErrUsage whose text is only the
// mistake.
type usageMistake struct{ msg string }

func (u usageMistake) Error() string        { return u.msg }
func (u usageMistake) Is(target error) bool { return target == ErrUsage }

func usageErr(format string, args ...any) error {
	return usageMistake{fmt.Sprintf(format, args...)}
}

// DefaultColumns is the default set of compared configurations: each
// backend's default and, where it has one, its safest configuration
// (for Redlock: a margin of one grant for a failover, fencing and
// restart safety).
var DefaultColumns = []string{
	"singleredis",
	"singleredis?fence=true",
	"redlock",
	"redlock?failovers=1&fence=true&restart_safety=true",
	"legacysetnx?unit=ms",
	"etcdlease",
}

// Column is one compared configuration: a backend and the URL parameters a
// user would set, opened through the backend's own URL parser on servers
// that compare starts.
type Column struct {
	// Label is the column's short heading, such as "redlock+rs".
	Label string `json:"label"`
	// Spec is the configuration as given, such as
	// "redlock?restart_safety=true".
	Spec string `json:"spec"`
	// FullSpec adds the parameters compare needs and sets itself (such as
	// max_ttl for restart safety).
	FullSpec string `json:"full_spec"`
	// Backend is the backend's name.
	Backend string `json:"backend"`
	// Servers says what the column runs on.
	Servers string `json:"servers"`
	// Guarantees is what the configured Locker declares.
	Guarantees lockswap.Guarantees `json:"-"`

	kit kit
}

// backendInfo is what compare knows about one backend.
type backendInfo struct {
	name string
	// short is the start of its columns' labels.
	short string
	// shorthand is the configuration --backends name stands for.
	shorthand string
	// params are the URL parameters a column may set.
	params []string
	// column makes the column's kit from its parameters (checked by the
	// backend's URL parser).
	column func(q url.Values) (kit, string, error)
}

// backendInfos lists the backends in column order. A new backend is one
// entry here.
var backendInfos = []backendInfo{
	{name: "singleredis", short: "single", shorthand: "singleredis", params: []string{"fence", "fair_wait"},
		column: func(q url.Values) (kit, string, error) {
			return redisColumn("singleredis", 1, q, 500*time.Millisecond, false, nil)
		}},
	{name: "redlock", short: "redlock", shorthand: "redlock", params: []string{"fence", "restart_safety", "max_ttl", "drift", "failovers"},
		column: func(q url.Values) (kit, string, error) {
			var seed func(context.Context, redisclient.Client) error
			if q.Get("restart_safety") == "true" {
				if q.Get("max_ttl") == "" {
					q.Set("max_ttl", RedlockMaxTTL.String())
				}
				seed = seedRedlockEpoch
			}
			return redisColumn("redlock", 5, q, 500*time.Millisecond, false, seed)
		}},
	{name: "legacysetnx", short: "legacy", shorthand: "legacysetnx?unit=ms", params: []string{"unit", "server_time", "redis_expiry"},
		column: func(q url.Values) (kit, string, error) {
			return redisColumn("legacysetnx", 1, q, time.Second, true, nil)
		}},
	{name: "etcdlease", short: "etcd", shorthand: "etcdlease",
		column: func(url.Values) (kit, string, error) {
			return etcdKit, "etcd: 1 member, 3 where members are stopped", nil
		}},
}

// BackendNames lists the backends in column order.
func BackendNames() []string {
	out := make([]string, len(backendInfos))
	for i, b := range backendInfos {
		out[i] = b.name
	}
	return out
}

// kits are the backends in their default configurations (what --backends
// names), in column order; bench measures these.
var kits = func() []kit {
	out := make([]kit, len(backendInfos))
	for i, b := range backendInfos {
		c, err := ParseColumn(b.shorthand)
		if err != nil {
			panic(err)
		}
		out[i] = c.kit
		out[i].name = b.name
	}
	return out
}()

// ShorthandColumns returns the columns --backends names stands for: each
// backend's default configuration. An unknown name is an ErrUsage error.
func ShorthandColumns(backends []string) ([]string, error) {
	var out []string
	for _, name := range backends {
		name = canonical(name)
		b, ok := backendInfo{}, false
		for _, x := range backendInfos {
			if x.name == name {
				b, ok = x, true
			}
		}
		if !ok {
			return nil, usageErr("unknown backend %q (known: %s)", name, strings.Join(BackendNames(), ", "))
		}
		out = append(out, b.shorthand)
	}
	return out, nil
}

// canonical returns the backend name of name, a backend's name or an
// alias of its URL scheme without TLS (etcd for etcdlease, redis for
// singleredis); other names as they are.
func canonical(name string) string {
	if s, ok := registry.Lookup(name); ok && slices.Contains(s.Aliases, name) {
		return s.Name
	}
	return name
}

// ParseColumns parses column specs and gives each a unique label. Errors
// match ErrUsage.
func ParseColumns(specs []string) ([]Column, error) {
	var out []Column
	seen := map[string]int{}
	for _, s := range specs {
		c, err := ParseColumn(s)
		if err != nil {
			return nil, err
		}
		if n := seen[c.Label]; n > 0 {
			c.Label = fmt.Sprintf("%s#%d", c.Label, n+1)
		}
		seen[c.Label]++
		c.kit.name = c.Label
		out = append(out, c)
	}
	return out, nil
}

// ParseColumn parses one configuration, "backend" or
// "backend?name=value&...", with the parameters checked by the backend's
// own URL parser. Errors match ErrUsage.
func ParseColumn(spec string) (Column, error) {
	name, rawQuery, _ := strings.Cut(strings.TrimSpace(spec), "?")
	name = canonical(name)
	var b *backendInfo
	for i := range backendInfos {
		if backendInfos[i].name == name {
			b = &backendInfos[i]
		}
	}
	if b == nil {
		return Column{}, usageErr("column %q: unknown backend %q (known: %s)", spec, name, strings.Join(BackendNames(), ", "))
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Column{}, usageErr("column %q: %v", spec, err)
	}
	keys := sortedKeys(q)
	for _, k := range keys {
		switch {
		case k == "ttl" || k == "prefix" || k == "client" || k == "dial_timeout" || k == "require":
			return Column{}, usageErr("column %q: compare sets %s itself (it chooses TTLs per scenario and starts its own servers and clients)", spec, k)
		case !contains(b.params, k):
			known := "none"
			if len(b.params) > 0 {
				known = strings.Join(b.params, ", ")
			}
			return Column{}, usageErr("column %q: %s has no parameter %q that compare can set (known: %s)", spec, name, k, known)
		case len(q[k]) != 1:
			return Column{}, usageErr("column %q: parameter %q given %d times", spec, k, len(q[k]))
		}
	}
	label := b.short
	for _, k := range keys {
		label += paramLabel(k, q.Get(k))
	}
	k, servers, err := b.column(q)
	if err != nil {
		return Column{}, usageErr("column %q: %v", spec, err)
	}
	full := name
	if len(q) > 0 {
		full += "?" + encodeQuery(q)
	}
	k.name = label
	return Column{Label: label, Spec: strings.TrimSpace(spec), FullSpec: full, Backend: name, Servers: servers,
		Guarantees: k.guarantees, kit: k}, nil
}

// paramLabel is a parameter's part of a column label: "+rs" for
// restart_safety=true, "-rs" for false, "+ms" for unit=ms, "+fo=1" for
// failovers=1 (whose initial fence=true has).
func paramLabel(k, v string) string {
	if k == "failovers" {
		return "+fo=" + v
	}
	var initials string
	for _, w := range strings.Split(k, "_") {
		if w != "" {
			initials += w[:1]
		}
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return "+" + initials
	case "false", "0", "no", "off":
		return "-" + initials
	}
	if k == "unit" {
		return "+" + v
	}
	return "+" + initials + "=" + v
}

func sortedKeys(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// encodeQuery is url.Values.Encode in key order, without escaping the
// characters durations and units use.
func encodeQuery(q url.Values) string {
	var parts []string
	for _, k := range sortedKeys(q) {
		parts = append(parts, k+"="+url.QueryEscape(q.Get(k)))
	}
	return strings.Join(parts, "&")
}

// redisColumn makes the kit of a Redis backend configured by q: its
// Lockers are opened through the backend's URL parser (package registry)
// with the clients compare makes for the servers it starts.
func redisColumn(name string, n int, q url.Values, ttl time.Duration, readsClock bool, seed func(context.Context, redisclient.Client) error) (kit, string, error) {
	open := func(clients []redisclient.Client, prefix string, logger *slog.Logger) (lockswap.Locker, error) {
		cq := url.Values{}
		for k, v := range q {
			cq[k] = v
		}
		if prefix != "" {
			cq.Set("prefix", prefix)
		}
		return registry.Open(context.Background(), &registry.URL{Scheme: name, Query: cq}, registry.Clients{Redis: clients, Logger: logger})
	}
	// The declared guarantees are the configured Locker's own, from a
	// Locker over clients that are never used (go-redis dials lazily).
	placeholders := make([]redisclient.Client, n)
	for i := range placeholders {
		c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", i+1)})
		defer c.Close()
		placeholders[i] = redisadapter.New(c)
	}
	lk, err := open(placeholders, "", nil)
	if err != nil {
		return kit{}, "", err
	}
	g := lk.Guarantees()
	lk.Close()
	rb := redisBackend{name: name, n: n, g: g, ttl: ttl, seed: seed,
		build: func(c []redisclient.Client, skew time.Duration, prefix string, logger *slog.Logger) (lockswap.Locker, error) {
			if skew != 0 {
				return skewedLegacy(c[0], q, skew, prefix)
			}
			return open(c, prefix, logger)
		}}
	// legacysetnx reads the client's clock unless server_time is set; the
	// skewed client of the clock-ahead scenario then stands for an old
	// client sharing the keys, which always reads its own clock (see
	// skewedLegacy).
	rb.readsClock = readsClock
	servers := "1 Redis server"
	if n > 1 {
		servers = fmt.Sprintf("%d independent Redis masters", n)
	}
	if seed != nil {
		servers += "; restart-safety epochs pre-set as on long-running servers"
		// A configuration that keeps a server-wide key is not run on the
		// user's servers (see setupUser).
		rb.serverWideKey = redlock.EpochKey
	}
	if name == "redlock" && g.Fencing && rb.serverWideKey == "" {
		// A fenced Redlock registers its masters on them (MembersKey).
		rb.serverWideKey = redlock.MembersKey
	}
	return rb.kit(), servers, nil
}

// skewedLegacy is the clock-ahead scenario's second legacysetnx client: its
// wall clock runs skew ahead. It always reads its own clock, as an old
// SETNX client does: with server_time=true only lockswap's own clients
// read the server's clock, and the declared clock assumption is there for
// the old clients that share the keys.
func skewedLegacy(c redisclient.Client, q url.Values, skew time.Duration, prefix string) (lockswap.Locker, error) {
	unit, err := legacysetnx.ParseUnit(q.Get("unit"))
	if err != nil {
		return nil, err
	}
	return legacysetnx.New(c, legacysetnx.Options{Prefix: prefix, Unit: unit, Clock: func() time.Time { return time.Now().Add(skew) }})
}

// RedlockMaxTTL is the max_ttl compare sets for restart safety when the
// column does not: the longest TTL compare uses (the restart scenario holds
// its lock for 30 s).
const RedlockMaxTTL = 30 * time.Second

// seedRedlockEpoch marks a fresh server as up for an hour, as in a
// long-running deployment: with restart safety on, Redlock would otherwise
// treat a server it has never seen as just restarted and wait MaxTTL
// before counting it. A restart without persistence erases the mark, which
// is what the restart scenario measures.
func seedRedlockEpoch(ctx context.Context, c redisclient.Client) error {
	now, err := c.Time(ctx)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, "SET", redlock.EpochKey, fmt.Sprintf("%d.0.compare", now.Add(-time.Hour).Unix()))
	return err
}
