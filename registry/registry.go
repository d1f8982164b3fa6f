// Package registry maps backend URLs to the backends that open them, as
// database/sql maps driver names to drivers: each backend package registers
// its scheme, its parameters and how to check and open a URL of it (in an
// init function), and a program opens the schemes of the packages it
// imports.
//
//	import (
//		_ "github.com/lockswap/lockswap/redisclient/goredis" // client=goredis
//		_ "github.com/lockswap/lockswap/singleredis"         // singleredis://
//		"github.com/lockswap/lockswap/registry"
//	)
//
//	locker, err := registry.OpenURL(ctx, "singleredis://127.0.0.1:6379?ttl=10s")
//
// Such a program links only what it imports: no etcd and no redigo. Package
// backend imports every built-in backend and every Redis client, and adds
// the JSON Config.
//
// Every scheme takes require=fencing,failover,... (lockswap.Property
// names): opening a backend whose Guarantees lack one fails with an error
// naming it. require=durable ([RequireDurable]) checks the servers'
// persistence settings at Open.
package registry

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/acquire"
	"github.com/lockswap/lockswap/internal/redact"
	"github.com/lockswap/lockswap/redisclient"
)

// Scheme is one backend's registration.
type Scheme struct {
	// Name is the backend's name and URL scheme, such as "singleredis".
	Name string
	// Aliases are other schemes that open the same backend ("etcd" for
	// etcdlease).
	Aliases []string
	// TLS makes the name and each alias with an "s" appended
	// ("singlerediss") the same backend over TLS.
	TLS bool
	// Params are the query parameters the backend takes; require is taken
	// by every scheme and need not be listed.
	Params []string
	// Parse checks u, with the clients given in c, and returns what opens
	// it. It must not dial: URLs are checked with it before anything is
	// opened. Errors match lockswap.ErrInvalid, name the problem and never
	// contain the password.
	Parse func(u *URL, c Clients) (OpenFunc, error)
}

// OpenFunc opens a checked URL.
type OpenFunc func(ctx context.Context) (lockswap.Locker, error)

// Clients are already built clients and settings for Open. A backend uses a
// given client instead of dialing the URL's hosts, and does not close it.
type Clients struct {
	// Redis are Redis clients: one for singleredis and legacysetnx, one per
	// master for redlock.
	Redis []redisclient.Client
	// Client is a client of another kind, such as the *clientv3.Client of
	// etcdlease.
	Client any
	// TLS is the TLS configuration for clients a backend dials itself over
	// a TLS scheme; nil means the system roots.
	TLS *tls.Config
	// Logger is passed on to the backend's Options.Logger (see
	// docs/observability.md); nil: the backend logs nothing. A logger is
	// not data, so no URL parameter sets it.
	Logger *slog.Logger
}

// TLSConfig returns c.TLS, or a default (TLS 1.2 or later, the system
// roots) when it is nil.
func (c Clients) TLSConfig() *tls.Config {
	if c.TLS != nil {
		return c.TLS
	}
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

var (
	mu      sync.RWMutex
	schemes = map[string]*Scheme{} // by name and alias
	names   []string               // registered names, sorted
)

// Register makes a backend's schemes available. It panics if a scheme is
// taken, or s lacks a name or Parse: it is meant for init functions.
func Register(s Scheme) {
	mu.Lock()
	defer mu.Unlock()
	if s.Name == "" || s.Parse == nil {
		panic("registry: Register needs a Name and a Parse function")
	}
	sp := &s
	for _, n := range append([]string{s.Name}, s.Aliases...) {
		n = strings.ToLower(n)
		if _, dup := schemes[n]; dup {
			panic("registry: scheme " + n + " registered twice")
		}
		schemes[n] = sp
	}
	names = append(names, s.Name)
	sort.Strings(names)
}

// Lookup returns the backend registered for scheme (a name or an alias,
// without the TLS "s").
func Lookup(scheme string) (Scheme, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := schemes[strings.ToLower(scheme)]
	if !ok {
		return Scheme{}, false
	}
	return *s, true
}

// Names returns the names of the registered backends, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return append([]string(nil), names...)
}

// URL is a backend URL, split into the parts every backend shares:
//
//	scheme://[user:password@]host:port[,host:port...][/path][?name=value&...]
type URL struct {
	// Scheme is the scheme as written, lower case, without the TLS "s".
	Scheme string
	// TLS is set by a TLS scheme ("singlerediss").
	TLS bool
	// Username and Password are the credentials, decoded.
	Username, Password string
	// Hosts are host:port pairs.
	Hosts []string
	// Path is what follows the hosts' "/", such as a Redis database number.
	Path string
	// Query holds the parameters, one value each.
	Query url.Values
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, lockswap.ErrInvalid)...)
}

// ParseURL splits raw into a URL and checks it (Check, with no given
// clients). Errors match lockswap.ErrInvalid, name the parameter at fault,
// and never contain the password.
func ParseURL(raw string) (*URL, error) {
	u, err := split(raw)
	if err != nil {
		return nil, redact.Error(err)
	}
	if err := Check(u, Clients{}); err != nil {
		return nil, err
	}
	return u, nil
}

// split parses the syntax of a backend URL.
func split(raw string) (*URL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return nil, invalid("%q is not a backend URL (want scheme://...)", redactRaw(raw))
	}
	u := &URL{Scheme: strings.ToLower(scheme)}
	if _, known := Lookup(u.Scheme); !known && strings.HasSuffix(u.Scheme, "s") {
		if s, known := Lookup(strings.TrimSuffix(u.Scheme, "s")); known && s.TLS {
			u.Scheme, u.TLS = strings.TrimSuffix(u.Scheme, "s"), true
		}
	}
	if _, known := Lookup(u.Scheme); !known {
		return nil, unknownScheme(scheme)
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
		if u.Username, err = url.PathUnescape(user); err != nil {
			return nil, invalid("username is not valid percent-encoding")
		}
		if hasPass {
			if u.Password, err = url.PathUnescape(pass); err != nil {
				return nil, invalid("password is not valid percent-encoding") // the password itself is not repeated
			}
		}
	}
	authority, u.Path, _ = strings.Cut(authority, "/")
	if authority != "" {
		u.Hosts = strings.Split(authority, ",")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, invalid("query: %v", err)
	}
	u.Query = q
	return u, nil
}

func unknownScheme(scheme string) error {
	return invalid("unknown scheme %q (want %s, with an s suffix for TLS)", scheme, strings.Join(Names(), ", "))
}

// Check checks u: its scheme, hosts, parameter names, require= and then
// everything else by the backend's Parse, with the clients in c (given
// clients stand for hosts). It dials nothing.
func Check(u *URL, c Clients) error {
	_, _, err := check(u, c)
	return redact.Error(err)
}

func check(u *URL, c Clients) (*Scheme, OpenFunc, error) {
	s, ok := Lookup(u.Scheme)
	if !ok {
		return nil, nil, unknownScheme(u.Scheme)
	}
	if u.TLS && !s.TLS {
		return nil, nil, invalid("%s has no TLS scheme", s.Name)
	}
	if err := checkHosts(u.Hosts); err != nil {
		return nil, nil, err
	}
	allowed := append(append([]string(nil), s.Params...), "require")
	keys := make([]string, 0, len(u.Query))
	for k := range u.Query {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(allowed, k) {
			return nil, nil, invalid("unknown parameter %q for %s (known: %s)", k, u.Scheme, strings.Join(allowed, ", "))
		}
		if len(u.Query[k]) != 1 {
			return nil, nil, invalid("parameter %q given %d times", k, len(u.Query[k]))
		}
	}
	for _, r := range u.Require() {
		if r == RequireDurable {
			continue
		}
		if _, err := (lockswap.Guarantees{}).Has(r); err != nil {
			known := []string{}
			for _, p := range lockswap.Properties() {
				known = append(known, string(p))
			}
			return nil, nil, invalid("require=%s: unknown property (known: %s, %s)", r, strings.Join(known, ", "), RequireDurable)
		}
	}
	open, err := s.Parse(u, c)
	if err != nil {
		return nil, nil, err
	}
	return &s, open, nil
}

// Open checks u and opens its backend with the clients in c. It fails with
// an error matching lockswap.ErrInvalid, naming the missing property, when
// the backend's Guarantees lack one of require=.
func Open(ctx context.Context, u *URL, c Clients) (lockswap.Locker, error) {
	lk, err := openChecked(ctx, u, c)
	// A malformed URL's parts, which the errors may repeat, can hold a
	// password (user information, a nested URL's): they never show.
	return lk, redact.Error(err)
}

func openChecked(ctx context.Context, u *URL, c Clients) (lockswap.Locker, error) {
	_, open, err := check(u, c)
	if err != nil {
		return nil, err
	}
	lk, err := open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", u, err)
	}
	if req := u.Require(); len(req) > 0 {
		durable := slices.Contains(req, RequireDurable)
		req = slices.DeleteFunc(req, func(p lockswap.Property) bool { return p == RequireDurable })
		err := lk.Guarantees().Require(req...)
		if err == nil && durable {
			err = requireDurable(ctx, lk)
		}
		if err != nil {
			lk.Close()
			return nil, fmt.Errorf("open %s: %w", u, err)
		}
	}
	return lk, nil
}

// RequireDurable is the require= value that makes Open read the
// persistence and eviction settings of every server of a Locker that
// keeps fence counters or restart-safety epochs (redlock with fence=true
// or restart_safety=true, singleredis with fence=true) and refuse one
// whose settings let a crash bring them back older or memory pressure
// evict them (redisclient.Durability.Risks). A server whose settings
// cannot be read (CONFIG GET denied, no answer) does not fail it. Unlike
// the properties of lockswap.Guarantees, it is checked against the
// servers, not the backend.
const RequireDurable lockswap.Property = "durable"

// DurabilityChecker is implemented by the Lockers require=durable applies
// to: CheckDurability returns nil when their servers keep their counters,
// and an error matching lockswap.ErrInvalid that names what to fix
// otherwise, or when the Locker keeps no counters (no fence=true or
// restart_safety=true).
type DurabilityChecker interface {
	CheckDurability(ctx context.Context) error
}

// requireDurable checks lk for require=durable, bounded by ctx and
// lockswap.RequestTimeout.
func requireDurable(ctx context.Context, lk lockswap.Locker) error {
	dc, ok := lk.(DurabilityChecker)
	if !ok {
		return fmt.Errorf("require=durable: backend %s keeps no fence counters or epochs on servers whose settings it can read (it applies to redlock with fence=true or restart_safety=true and singleredis with fence=true): %w", lk.Guarantees().Backend, lockswap.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, lockswap.RequestTimeout)
	defer cancel()
	err := dc.CheckDurability(ctx)
	if err == nil && ctx.Err() != nil {
		// The servers' settings were not read in time: unchecked is
		// not checked.
		return fmt.Errorf("require=durable: the servers' settings were not read in time: %w (%w)", lockswap.ErrUnavailable, ctx.Err())
	}
	return err
}

// OpenURL parses raw and opens the backend it names.
func OpenURL(ctx context.Context, raw string) (lockswap.Locker, error) {
	u, err := split(raw)
	if err != nil {
		return nil, redact.Error(err)
	}
	return Open(ctx, u, Clients{})
}

// Require returns the properties of require=.
func (u *URL) Require() []lockswap.Property {
	var out []lockswap.Property
	for _, p := range strings.Split(u.Query.Get("require"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, lockswap.Property(p))
		}
	}
	return out
}

// Bool returns parameter name as a boolean; false when absent.
func (u *URL) Bool(name string) (bool, error) {
	v, ok := u.get(name)
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid("parameter %s=%q: want true or false", name, v)
	}
	return b, nil
}

// Duration returns parameter name as a positive duration; 0 when absent.
func (u *URL) Duration(name string) (time.Duration, error) {
	v, ok := u.get(name)
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, invalid("parameter %s=%q: want a positive duration such as 10s or 500ms", name, v)
	}
	return d, nil
}

// Int returns parameter name as a whole number; 0 when absent. The
// backend checks its range.
func (u *URL) Int(name string) (int, error) {
	v, ok := u.get(name)
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, invalid("parameter %s=%q: want a whole number such as 3", name, v)
	}
	return n, nil
}

// Float returns parameter name as a number; 0 when absent.
func (u *URL) Float(name string) (float64, error) {
	v, ok := u.get(name)
	if !ok {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, invalid("parameter %s=%q: want a number such as 0.01", name, v)
	}
	return f, nil
}

// TTL returns ttl=, checked against [lockswap.MinTTL, lockswap.MaxTTL]; 0
// when absent. A backend checks its own range on top.
func (u *URL) TTL() (time.Duration, error) {
	ttl, err := u.Duration("ttl")
	if err != nil || ttl == 0 {
		return 0, err
	}
	if err := acquire.ValidateTTL(ttl); err != nil {
		return 0, fmt.Errorf("ttl=%v: %w", ttl, err)
	}
	return ttl, nil
}

// DB returns the path as a Redis database number; 0 when there is none.
func (u *URL) DB() (int, error) {
	if u.Path == "" {
		return 0, nil
	}
	db, err := strconv.Atoi(u.Path)
	if err != nil || db < 0 {
		return 0, invalid("database %q in the path is not a non-negative number", u.Path)
	}
	return db, nil
}

// NoPath refuses a path, for backends that take none.
func (u *URL) NoPath() error {
	if u.Path != "" {
		return invalid("%s URLs take no path (got /%s); use prefix=", u.Scheme, u.Path)
	}
	return nil
}

func (u *URL) get(name string) (string, bool) {
	vs, ok := u.Query[name]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// String renders u with the password replaced by "xxxxx".
func (u *URL) String() string { return u.render(true) }

// GoString renders u for %#v with the password replaced by "xxxxx", so
// that a debug print of a URL (or of a struct holding one) does not show
// it.
func (u *URL) GoString() string { return "registry.URL(" + strconv.Quote(u.String()) + ")" }

// Unredacted renders u with its password, to pass it on (a URL inside a
// parameter). Never print it.
func (u *URL) Unredacted() string { return u.render(false) }

func (u *URL) render(redact bool) string {
	var b strings.Builder
	b.WriteString(u.Scheme)
	if u.TLS {
		b.WriteString("s")
	}
	b.WriteString("://")
	if u.Username != "" || u.Password != "" {
		b.WriteString(url.PathEscape(u.Username))
		if u.Password != "" {
			b.WriteString(":")
			if redact {
				b.WriteString("xxxxx")
			} else {
				b.WriteString(url.PathEscape(u.Password))
			}
		}
		b.WriteString("@")
	}
	b.WriteString(strings.Join(u.Hosts, ","))
	if u.Path != "" {
		b.WriteString("/" + u.Path)
	}
	if len(u.Query) > 0 {
		b.WriteString("?" + u.Query.Encode())
	}
	return b.String()
}

// WithParam returns a copy of u with parameter name set to value.
func (u *URL) WithParam(name, value string) *URL {
	c := *u
	c.Query = url.Values{}
	for k, v := range u.Query {
		c.Query[k] = v
	}
	c.Query.Set(name, value)
	return &c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkHosts refuses a host list with an empty entry ("a,,b"), an entry
// that is not host:port with a port from 1 to 65535 (a space after a comma
// included), and one server listed twice: Redlock would count it twice
// toward its quorum. Two spellings of one address ("H:6379", "h:06379")
// are the same entry; two names of one server ("localhost", "127.0.0.1")
// cannot be told apart without a lookup and are not refused here (redlock
// refuses clients that report the same address when it is opened).
func checkHosts(hosts []string) error {
	seen := make(map[string]int, len(hosts))
	for i, h := range hosts {
		key, err := checkHostPort(h)
		if err != nil {
			return fmt.Errorf("host %d of %d: %w", i+1, len(hosts), err)
		}
		if j, dup := seen[key]; dup {
			return invalid("hosts %d and %d of %d are the same server %s: list each server once (Redlock would count it twice toward its quorum)", j+1, i+1, len(hosts), quoteAddr(h))
		}
		seen[key] = i
	}
	return nil
}

// checkHostPort checks one entry of a host list and returns it in a form
// that is equal for two spellings of one address: the host lower case,
// the port as a number.
func checkHostPort(h string) (string, error) {
	if h == "" {
		return "", invalid("empty entry in the host list (two commas in a row, or a comma at an end?)")
	}
	if i := strings.IndexFunc(h, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(h[i:])
		return "", invalid("address %s contains %q: want host:port without spaces (a space after a comma?)", quoteAddr(h), r)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil || host == "" {
		return "", invalid("address %s: want host:port", quoteAddr(h))
	}
	p, err := strconv.Atoi(port)
	if err != nil || strings.Trim(port, "0123456789") != "" || p < 1 || p > 65535 {
		return "", invalid("address %s: port %q is not a number between 1 and 65535", quoteAddr(h), port)
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(p)), nil
}

// quoteAddr quotes a host list entry for an error, with everything before
// its last "@" or "%40" hidden: an entry has neither unless the URL is
// malformed, and then what comes before may be a password (a URL's user
// information, or a nested URL's, percent-encoded).
func quoteAddr(h string) string {
	if at := max(strings.LastIndex(h, "@"), redact.LastIndexFold(h, "%40")); at >= 0 {
		h = "xxxxx" + h[at:]
	}
	return strconv.Quote(h)
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
