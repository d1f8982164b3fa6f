// Package logtest records log/slog records for tests: a [Recorder] is a
// slog.Handler that keeps every record it is given, with its attributes
// flattened, and waits for one.
package logtest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Record is one record as a test reads it.
type Record struct {
	Level   slog.Level
	Message string
	// Attrs holds the record's attributes and those added with With,
	// by key ("group.key" inside a group).
	Attrs map[string]slog.Value
}

// Has reports whether r has the attribute key.
func (r Record) Has(key string) bool { _, ok := r.Attrs[key]; return ok }

// String returns the attribute key as text ("" when missing).
func (r Record) String(key string) string {
	v, ok := r.Attrs[key]
	if !ok {
		return ""
	}
	return v.String()
}

// Recorder keeps the records of every logger made from it. Its methods
// are safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	records []Record
	changed chan struct{} // closed and replaced on each record
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{changed: make(chan struct{})} }

// Logger returns a logger that writes to r, at every level.
func (r *Recorder) Logger() *slog.Logger { return slog.New(&handler{r: r}) }

// Records returns the records so far.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Find returns the records with message msg.
func (r *Recorder) Find(msg string) []Record {
	var out []Record
	for _, rec := range r.Records() {
		if rec.Message == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Wait waits, for up to timeout, for a record with message msg and
// returns the first; the test fails if none comes.
func (r *Recorder) Wait(t testing.TB, msg string, timeout time.Duration) Record {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, rec := range r.records {
			if rec.Message == msg {
				r.mu.Unlock()
				return rec
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %q record within %v; records: %v", msg, timeout, r.Records())
			return Record{}
		}
	}
}

func (r *Recorder) add(rec Record) {
	r.mu.Lock()
	r.records = append(r.records, rec)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

type handler struct {
	r      *Recorder
	attrs  []slog.Attr // from WithAttrs, keys already prefixed
	prefix string      // from WithGroup: "a.b."
}

func (h *handler) Enabled(context.Context, slog.Level) bool { return true }

func (h *handler) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Message: rec.Message, Attrs: map[string]slog.Value{}}
	for _, a := range h.attrs {
		out.Attrs[a.Key] = a.Value
	}
	rec.Attrs(func(a slog.Attr) bool {
		flatten(out.Attrs, h.prefix, a)
		return true
	})
	h.r.add(out)
	return nil
}

func flatten(m map[string]slog.Value, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			flatten(m, prefix+a.Key+".", g)
		}
		return
	}
	m[prefix+a.Key] = v
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	m := map[string]slog.Value{}
	for _, a := range attrs {
		flatten(m, h.prefix, a)
	}
	n := &handler{r: h.r, prefix: h.prefix, attrs: append([]slog.Attr(nil), h.attrs...)}
	for k, v := range m {
		n.attrs = append(n.attrs, slog.Attr{Key: k, Value: v})
	}
	return n
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, attrs: h.attrs, prefix: h.prefix + name + "."}
}
