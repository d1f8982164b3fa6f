// Package optionstest checks that a backend's Options and its URL are one
// configuration in two forms: every field of Options that a user sets has
// a URL parameter that sets it, and every parameter of the backend's URL
// scheme sets a field of Options or is one of the connection's. A field
// added to Options without a parameter, or a parameter registered without
// a field, fails the backend's test.
//
// Fields that no URL can carry are exempt, by their type, not by a list of
// names: functions and interfaces (Retry, Closer, LegacyKey, OnLegacyNet,
// the Lockers of migrate), slices of interfaces (Closers) and the
// *slog.Logger, which registry.Clients gives.
package optionstest

import (
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lockswap/lockswap/registry"
)

// Row is one URL parameter and the field of Options it sets.
type Row struct {
	// Field is the name of the field of Options.
	Field string
	// Param and Value are the parameter and the value the URL gives it.
	Param, Value string
	// Want is the value the field must then have: not its zero value, so
	// that the row shows the parameter does something. Nil for a field
	// that is exempt by its type but has a URL form all the same
	// (migrate's legacy= and target=, opened into Lockers): the row then
	// only says which parameter it is.
	Want any
}

// Connection are the parameters of a URL that configure the connection
// (or the Open) rather than a field of Options: the client library, the
// dial timeout, the TLS files, require= and memlock's store= (which names
// the Store the Locker uses).
var Connection = []string{"client", "dial_timeout", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "require", "store"}

// Check checks rows against the Options of a backend whose zero value is
// zero and whose URL scheme is scheme. base is a valid URL of the scheme
// with a query (possibly empty, after "?"): each row's parameter is set in
// it (replacing the base's value, if any) and the result given to parse, which returns the Options it sets (of
// the type of zero) or an error.
//
// It fails t for a field of Options that no row names and that is not
// exempt by its type, for a row whose field does not exist or whose
// parsed value differs from Want, for a Want that is the zero value, and
// for a parameter of the scheme that is neither in Connection nor in a
// row.
func Check(t testing.TB, zero any, scheme, base string, parse func(raw string) (any, error), rows []Row) {
	t.Helper()
	typ := reflect.TypeOf(zero)
	if typ.Kind() != reflect.Struct {
		t.Fatalf("optionstest: %T is not a struct", zero)
	}
	named := map[string]bool{}
	for _, r := range rows {
		named[r.Field] = true
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() || exempt(f.Type) || named[f.Name] {
			continue
		}
		t.Errorf("%s.%s (%s) has no URL parameter: add one to the %s URL, and a row here",
			typ.Name(), f.Name, f.Type, scheme)
	}
	for _, r := range rows {
		f, ok := typ.FieldByName(r.Field)
		if !ok {
			t.Errorf("row %s=%s names %s.%s, which does not exist", r.Param, r.Value, typ.Name(), r.Field)
			continue
		}
		if r.Want == nil {
			if !exempt(f.Type) {
				t.Errorf("row %s=%s has no Want, but %s.%s is a field a URL sets", r.Param, r.Value, typ.Name(), r.Field)
			}
			continue
		}
		if reflect.ValueOf(r.Want).IsZero() {
			t.Errorf("row %s=%s wants the zero value of %s.%s: it would not show the parameter sets it", r.Param, r.Value, typ.Name(), r.Field)
			continue
		}
		raw, err := with(base, r.Param, r.Value)
		if err != nil {
			t.Fatalf("optionstest: base URL %q: %v", base, err)
		}
		got, err := parse(raw)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		v := reflect.ValueOf(got)
		if v.Type() != typ {
			t.Fatalf("optionstest: parse returned a %T, want a %s", got, typ)
		}
		if fv := v.FieldByName(r.Field).Interface(); !reflect.DeepEqual(fv, r.Want) {
			t.Errorf("%s: %s.%s = %#v, want %#v", raw, typ.Name(), r.Field, fv, r.Want)
		}
	}
	s, ok := registry.Lookup(scheme)
	if !ok {
		t.Fatalf("optionstest: scheme %q is not registered", scheme)
	}
	for _, p := range s.Params {
		if slices.Contains(Connection, p) || slices.ContainsFunc(rows, func(r Row) bool { return r.Param == p }) {
			continue
		}
		t.Errorf("parameter %s= of %s sets no field of %s: add a row (or it belongs in optionstest.Connection)", p, scheme, typ.Name())
	}
}

var loggerType = reflect.TypeFor[*slog.Logger]()

// exempt reports whether a field of type t cannot be written in a URL:
// a function, an interface, a slice of interfaces, or the Logger.
func exempt(t reflect.Type) bool {
	switch {
	case t == loggerType, t.Kind() == reflect.Func, t.Kind() == reflect.Interface:
		return true
	case t.Kind() == reflect.Slice:
		return t.Elem().Kind() == reflect.Interface
	}
	return false
}

// with returns base with its query parameter name set to value.
func with(base, name, value string) (string, error) {
	head, query, _ := strings.Cut(base, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", err
	}
	q.Set(name, value)
	return head + "?" + q.Encode(), nil
}

// Checked parses raw and checks it with registry, as Open does before it
// dials: the URL a backend's urlOptions reads.
func Checked(raw string) (*registry.URL, error) {
	u, err := registry.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if err := registry.Check(u, registry.Clients{}); err != nil {
		return nil, err
	}
	return u, nil
}

// CheckedRedis is Checked for the Redis backend name, with what every
// Redis backend's URL takes (registry.ParseRedis).
func CheckedRedis(name, raw string) (*registry.URL, registry.Redis, error) {
	u, err := Checked(raw)
	if err != nil {
		return nil, registry.Redis{}, err
	}
	r, err := registry.ParseRedis(name, u, registry.Clients{})
	return u, r, err
}
