package otel_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockswap/lockswap"
	lockotel "github.com/lockswap/lockswap/otel"
)

// recorder is an SDK MeterProvider and TracerProvider that keep what they
// record in memory.
type recorder struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() {
		_ = r.mp.Shutdown(context.Background())
		_ = r.tp.Shutdown(context.Background())
	})
	return r
}

// wrap wraps l to record into r.
func (r *recorder) wrap(l lockswap.Locker, opts ...lockotel.Option) lockswap.Locker {
	return lockotel.Wrap(l, append([]lockotel.Option{lockotel.WithMeterProvider(r.mp), lockotel.WithTracerProvider(r.tp)}, opts...)...)
}

// collect returns the metrics recorded so far, by name.
func (r *recorder) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, lockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// histCount returns the number of values, and their sum, that histogram
// name recorded with the attributes want.
func histCount(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
	}
	var n uint64
	var sum float64
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Count
			sum += dp.Sum
		}
	}
	return n, sum
}

// counter returns the value that counter name added with the attributes
// want.
func counter(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, m.Data)
	}
	if !s.IsMonotonic {
		t.Errorf("%s is not monotonic", name)
	}
	var v int64
	for _, dp := range s.DataPoints {
		if matches(dp.Attributes, want) {
			v += dp.Value
		}
	}
	return v
}

// ended returns the ended spans named name.
func (r *recorder) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// spanAttr returns span s's attribute k.
func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func outcome(oc string) attribute.KeyValue { return lockotel.AttrOutcome.String(oc) }
func operation(op string) attribute.KeyValue {
	return lockotel.AttrOperation.String(op)
}

// stub is a Locker whose calls answer what its fields say, and that keeps
// the span context each call was made under.
type stub struct {
	acquireErr, extendErr, releaseErr error
	spans                             []trace.SpanContext
	mu                                sync.Mutex
}

func (s *stub) saw(ctx context.Context) {
	s.mu.Lock()
	s.spans = append(s.spans, trace.SpanContextFromContext(ctx))
	s.mu.Unlock()
}

func (s *stub) Acquire(ctx context.Context, key string, _ ...lockswap.Option) (lockswap.Lock, error) {
	return s.TryAcquire(ctx, key)
}

func (s *stub) TryAcquire(ctx context.Context, key string, _ ...lockswap.Option) (lockswap.Lock, error) {
	s.saw(ctx)
	if s.acquireErr != nil {
		return nil, fmt.Errorf("stub: acquire %q: %w", key, s.acquireErr)
	}
	return &stubLock{s: s, key: key, done: make(chan struct{})}, nil
}

func (s *stub) Guarantees() lockswap.Guarantees { return lockswap.Guarantees{Backend: "stub"} }
func (s *stub) Close() error                    { return nil }

type stubLock struct {
	s    *stub
	key  string
	done chan struct{}
}

func (l *stubLock) Key() string           { return l.key }
func (l *stubLock) Token() string         { return "token" }
func (l *stubLock) Fence() (uint64, bool) { return 7, true }
func (l *stubLock) TTL() time.Duration    { return time.Minute }
func (l *stubLock) Deadline() time.Time   { return time.Now().Add(time.Hour) }
func (l *stubLock) Done() <-chan struct{} { return l.done }
func (l *stubLock) Extend(ctx context.Context, _ time.Duration) error {
	l.s.saw(ctx)
	if l.s.extendErr != nil {
		return fmt.Errorf("stub: extend %q: %w", l.key, l.s.extendErr)
	}
	return nil
}
func (l *stubLock) Release(ctx context.Context) error {
	l.s.saw(ctx)
	if l.s.releaseErr != nil {
		return fmt.Errorf("stub: release %q: %w", l.key, l.s.releaseErr)
	}
	return nil
}
