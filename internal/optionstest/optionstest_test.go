package optionstest

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/registry"
)

// fakeOptions stand for a backend's Options: two data fields, and fields
// exempt by their type.
type fakeOptions struct {
	TTL     time.Duration
	Fence   bool
	Retry   func() time.Duration
	Closer  io.Closer
	Closers []io.Closer
	Logger  *slog.Logger
}

func init() {
	registry.Register(registry.Scheme{Name: "optionstestfake", Params: []string{"ttl", "fence", "client"},
		Parse: func(*registry.URL, registry.Clients) (registry.OpenFunc, error) { return nil, nil }})
}

// parseFake is the fake backend's URL parse: it sets TTL from ttl= and
// Fence from fence=, unless broken names the parameter it ignores.
func parseFake(broken string) func(string) (any, error) {
	return func(raw string) (any, error) {
		u, err := registry.ParseURL(raw)
		if err != nil {
			return nil, err
		}
		var o fakeOptions
		if broken != "ttl" {
			if o.TTL, err = u.Duration("ttl"); err != nil {
				return nil, err
			}
		}
		if broken != "fence" {
			if o.Fence, err = u.Bool("fence"); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// run runs Check on the fake backend and returns its failures.
func run(t *testing.T, parse func(string) (any, error), rows []Row) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, fakeOptions{}, "optionstestfake", "optionstestfake://h:1?", parse, rows)
	}()
	<-done
	return r.failures
}

var goodRows = []Row{
	{Field: "TTL", Param: "ttl", Value: "3s", Want: 3 * time.Second},
	{Field: "Fence", Param: "fence", Value: "true", Want: true},
}

// TestCheckFails: Check passes a backend whose parameters and fields
// match, and fails one with a field without a row, a parameter without a
// row, a parameter that does not set its field, and a row that wants the
// zero value; functions, interfaces, slices of them and the Logger are
// exempt.
func TestCheckFails(t *testing.T) {
	if f := run(t, parseFake(""), goodRows); len(f) != 0 {
		t.Fatalf("a matching backend fails: %q", f)
	}
	for _, c := range []struct {
		name  string
		parse func(string) (any, error)
		rows  []Row
		want  string
	}{
		{"field without a parameter", parseFake(""), goodRows[:1], "Fence"},
		{"parameter that sets nothing", parseFake("fence"), goodRows, "fakeOptions.Fence = false"},
		{"zero Want", parseFake(""), []Row{goodRows[0], {Field: "Fence", Param: "fence", Value: "false", Want: false}}, "zero value"},
		{"no such field", parseFake(""), append([]Row{{Field: "Nope", Param: "ttl", Value: "1s", Want: time.Second}}, goodRows...), "Nope"},
	} {
		f := run(t, c.parse, c.rows)
		if !strings.Contains(strings.Join(f, "\n"), c.want) {
			t.Errorf("%s: failures %q, want one naming %q", c.name, f, c.want)
		}
	}
	// A parameter of the scheme without a row: fence is registered, and a
	// backend whose rows leave it out (and whose Options lack the field)
	// fails on it.
	type noFence struct{ TTL time.Duration }
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, noFence{}, "optionstestfake", "optionstestfake://h:1?", func(raw string) (any, error) {
			u, err := registry.ParseURL(raw)
			if err != nil {
				return nil, err
			}
			d, err := u.Duration("ttl")
			return noFence{d}, err
		}, goodRows[:1])
	}()
	<-done
	if !strings.Contains(strings.Join(r.failures, "\n"), "parameter fence=") {
		t.Errorf("a scheme parameter without a row: failures %q, want one naming fence=", r.failures)
	}
}
