// Package otel records what a [lockswap.Locker] does with OpenTelemetry:
// metrics of waits, attempts, holds, extensions, lost locks and failed
// releases, and a span for every Acquire, TryAcquire, Extend and Release.
//
//	locker = otel.Wrap(locker) // the global MeterProvider and TracerProvider
//
// The returned Locker behaves as the one it wraps: the same locks, errors,
// Guarantees and Close. Its locks keep Key, Token, Fence, TTL, Deadline and
// Done; Extend and Release are recorded on their way through. Nothing runs
// in the background: the package starts no goroutine and no timer, and a
// loss is seen when the holder calls Extend or Release.
//
// The package is a Go module of its own (github.com/lockswap/lockswap/otel),
// so that a program that does not import it does not require the
// OpenTelemetry SDK or the Prometheus client, nor their versions, in its own
// module graph. Programs usually import it under another name, since they
// also import go.opentelemetry.io/otel:
//
//	import lockotel "github.com/lockswap/lockswap/otel"
//
// # Metrics
//
// The meter is named [ScopeName]. Every instrument carries
// lockswap.backend (the Guarantees' Backend, or [WithBackend]) and the
// attributes of [WithAttributes]; none carries the key, whose values are
// unbounded (a time series per key) and may be sensitive.
//
//	| name                      | instrument       | unit        | attributes         | what                                                     |
//	|---------------------------|------------------|-------------|--------------------|----------------------------------------------------------|
//	| lockswap.acquire.duration | Float64Histogram | s           | operation, outcome | how long Acquire or TryAcquire took: the wait for a lock |
//	| lockswap.acquire.attempts | Int64Histogram   | {attempt}   | operation, outcome | attempts one Acquire or TryAcquire made (kit Lockers)    |
//	| lockswap.hold.duration    | Float64Histogram | s           | outcome            | from Acquire's return to the call of Release, or to loss |
//	| lockswap.extensions       | Int64Counter     | {extension} | outcome            | Extend calls (lockswap.Do's renewals among them)         |
//	| lockswap.locks.lost       | Int64Counter     | {lock}      | operation          | locks that ended before their holder released them       |
//	| lockswap.release.failures | Int64Counter     | {release}   | outcome            | Release calls that failed other than with ErrLost        |
//
// lockswap.operation is acquire or try_acquire on the acquire histograms, and
// on lockswap.locks.lost where the loss was seen: extend or release.
// lockswap.outcome classifies the error with errors.Is, first match wins:
//
//   - acquire: acquired (no error), invalid (ErrInvalid), closed (ErrClosed),
//     held (ErrHeld: also an Acquire whose context ended while another
//     owner held the key, since its error matches both), cancelled (the
//     caller's context had ended when the call returned: the caller gave
//     up, also during an outage), unavailable (ErrUnavailable: an outage,
//     a backend's own request timeout among them), error (anything else);
//   - extend: extended, lost (ErrLost), then as acquire from invalid on;
//   - release: released, lost (ErrLost), then as acquire from invalid on;
//   - hold: released, lost, failed (Release returned another error).
//
// The count of the acquire histogram is the number of calls by outcome:
// held is the share of TryAcquire calls that met contention and of Acquire
// calls that gave up waiting for a holder; an Acquire that waited and got
// the lock is acquired, its wait in the duration. A lock counts as lost, once, when
// its Deadline had passed or Done was closed before its holder called
// Release, or when Extend or Release answered ErrLost. A lock that is never
// released nor extended is never seen lost: nothing watches it.
//
// An attempt is one request to the backend to take the lock, as the kit
// (package driver) counts it for a call whose context carries a
// [driver.CountAttempts] counter, which the wrapper gives every Acquire and
// TryAcquire: TryAcquire's one attempt, each attempt of Acquire's waiting
// loop, an attempt a releasing holder of the same Locker made on a queued
// waiter's behalf (a hand-over), and each Wait of a backend that waits
// without polling (etcdlease, singleredis with fair_wait), which counts 1
// however long it waits (see driver.Attempts). So a TryAcquire records 1,
// an Acquire of a free key 1, and an Acquire of a polling backend that
// waited behind a holder of the same Locker until its release 2 (its first
// attempt, then the one the release woke or made for it); more means it
// polled (a holder in another process, or an outage). A call refused
// before any request (an invalid key, a closed Locker, a context already
// ended) records no attempts. A Locker that is not built with the kit (one
// that implements lockswap.Locker itself, a stub) counts none, and then
// nothing is recorded for attempts, neither a value nor the span
// attribute, rather than a misleading 0. migrate passes the call's context
// to its backends, so in its dual phase a call records the attempts of
// both. The counter is made only when the span records or the histogram is
// enabled.
//
// # Spans
//
// The tracer is named [ScopeName]. Spans are named lockswap.Acquire,
// lockswap.TryAcquire, lockswap.Extend and lockswap.Release, of kind
// internal, and are the parent of the spans of the Redis or etcd client
// below them (their context is passed on). Each has lockswap.backend and
// lockswap.outcome; acquire spans also lockswap.attempts (when counted, see
// above), and those of a lock taken lockswap.fence (when the backend has
// fencing) and lockswap.ttl (seconds). A counting semaphore's permits
// carry lockswap.kind=semaphore on their spans and metrics, and an
// acquired permit's span lockswap.slot; the mutex's carry no kind. The
// key, as lockswap.key, only with [WithKeys]. A span's status is Error for the
// outcomes invalid, closed, unavailable, error and lost, with the outcome
// as its description; error texts (which name the key) become the
// description only with WithKeys.
//
// # Locks and Lockers it wraps
//
// A wrapped Lock or Locker has a method Unwrap that returns the one it
// wraps, for the backend's own accessors (driver.Data, the concrete
// Locker's methods):
//
//	inner := l.(interface{ Unwrap() lockswap.Lock }).Unwrap()
package otel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/lockswap/lockswap/otel"

// Attribute keys this package records.
const (
	// AttrBackend is the backend's name: memlock, singleredis, redlock,
	// legacysetnx, etcdlease, migrate, or a third-party backend's.
	AttrBackend = attribute.Key("lockswap.backend")
	// AttrOperation is acquire, try_acquire, extend or release.
	AttrOperation = attribute.Key("lockswap.operation")
	// AttrOutcome is how the call ended (see the package doc).
	AttrOutcome = attribute.Key("lockswap.outcome")
	// AttrKey is the lock's key, on spans only and only with [WithKeys].
	AttrKey = attribute.Key("lockswap.key")
	// AttrFence is the fencing number of an acquired lock, on spans.
	AttrFence = attribute.Key("lockswap.fence")
	// AttrTTL is the TTL of an acquired lock in seconds, on spans.
	AttrTTL = attribute.Key("lockswap.ttl")
	// AttrAttempts is the number of attempts an Acquire or TryAcquire
	// made (see driver.Attempts), on spans, when the wrapped Locker
	// counts them.
	AttrAttempts = attribute.Key("lockswap.attempts")
	// AttrKind is "semaphore" on the spans and metrics of a counting
	// semaphore's permits (lockswap.WithPermits), "read" and "write" on
	// those of a read-write lock's holds (lockswap.WithRead,
	// lockswap.WithWrite); the mutex's carry no kind, so that their
	// series are the same as before the other kinds.
	AttrKind = attribute.Key("lockswap.kind")
	// AttrSlot is the slot an acquired permit holds (lockswap.Slot), on
	// spans.
	AttrSlot = attribute.Key("lockswap.slot")
)

// AttrKind's values.
const (
	// KindSemaphore is AttrKind's value for permits.
	KindSemaphore = "semaphore"
	// KindRead is AttrKind's value for read holds.
	KindRead = "read"
	// KindWrite is AttrKind's value for write holds.
	KindWrite = "write"
)

// Outcomes: the values of [AttrOutcome] (see the package doc for the
// order in which errors are classified).
const (
	OutcomeAcquired    = "acquired"    // Acquire or TryAcquire returned a lock
	OutcomeExtended    = "extended"    // Extend succeeded
	OutcomeReleased    = "released"    // Release succeeded
	OutcomeHeld        = "held"        // lockswap.ErrHeld: another owner holds the key
	OutcomeLost        = "lost"        // lockswap.ErrLost, or the lock ended before Release
	OutcomeInvalid     = "invalid"     // lockswap.ErrInvalid
	OutcomeClosed      = "closed"      // lockswap.ErrClosed
	OutcomeCancelled   = "cancelled"   // the caller's context had ended
	OutcomeUnavailable = "unavailable" // lockswap.ErrUnavailable
	OutcomeFailed      = "failed"      // a hold whose Release failed other than with ErrLost
	OutcomeError       = "error"       // any other error
)

// Operations: the values of [AttrOperation].
const (
	OpAcquire    = "acquire"     // Locker.Acquire
	OpTryAcquire = "try_acquire" // Locker.TryAcquire
	OpExtend     = "extend"      // Lock.Extend
	OpRelease    = "release"     // Lock.Release
)

// Instrument names (see the table in the package doc).
const (
	MetricAcquireDuration = "lockswap.acquire.duration" // histogram, s
	MetricAcquireAttempts = "lockswap.acquire.attempts" // histogram, {attempt}
	MetricHoldDuration    = "lockswap.hold.duration"    // histogram, s
	MetricExtensions      = "lockswap.extensions"       // counter, {extension}
	MetricLocksLost       = "lockswap.locks.lost"       // counter, {lock}
	MetricReleaseFailures = "lockswap.release.failures" // counter, {release}
)

// Histogram bucket boundaries in seconds. Waits range from a free key's
// round trip (well under a millisecond) to a caller's deadline; holds from
// a few milliseconds to the length of a job.
var (
	acquireBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets    = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}
	// attemptBuckets: one attempt (a free key, a TryAcquire, a hand-over
	// after one try) is the common case; a long wait of a polling backend
	// is its wait divided by the retry delay.
	attemptBuckets = []float64{1, 2, 3, 5, 10, 25, 50, 100, 250, 1000}
)

// Option configures [Wrap].
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	backend string
	keys    bool
	attrs   []attribute.KeyValue
}

// WithMeterProvider records metrics with mp instead of the global
// MeterProvider (otel.GetMeterProvider at the time of Wrap).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider records spans with tp instead of the global
// TracerProvider (otel.GetTracerProvider at the time of Wrap).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithBackend sets the lockswap.backend attribute; by default it is the
// wrapped Locker's Guarantees().Backend.
func WithBackend(name string) Option {
	return func(c *config) { c.backend = name }
}

// WithKeys adds the lock's key to spans (lockswap.key) and error texts,
// which name the key, to span statuses. Off by default: keys often name
// customers, documents or tenants. Metrics never carry the key.
func WithKeys() Option {
	return func(c *config) { c.keys = true }
}

// WithAttributes adds attrs to every metric and span, for example the
// lock's purpose when one program holds several kinds of locks. They must
// be few-valued: each combination is a time series.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Wrap returns a Locker that does what l does and records it with
// OpenTelemetry (see the package doc for what is recorded). Closing it
// closes l. An error creating an instrument, naming it, goes to the
// OpenTelemetry error handler (otel.Handle), as instrumentation libraries
// do; an instrument the MeterProvider does not give records nothing. Wrap
// panics if l is nil.
func Wrap(l lockswap.Locker, opts ...Option) lockswap.Locker {
	if l == nil {
		panic("otel: Wrap of a nil Locker")
	}
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.backend == "" {
		c.backend = l.Guarantees().Backend
	}
	if c.backend == "" {
		c.backend = "unknown"
	}
	return &locker{inner: l, in: newInstruments(c)}
}

// instruments are one wrapped Locker's meter, tracer and attribute sets.
type instruments struct {
	tracer trace.Tracer
	keys   bool
	base   []attribute.KeyValue // backend and WithAttributes: on every span

	acquire    metric.Float64Histogram
	attempts   metric.Int64Histogram
	hold       metric.Float64Histogram
	extensions metric.Int64Counter
	lost       metric.Int64Counter
	failures   metric.Int64Counter

	// sets caches the attribute sets of the metrics, one per operation and
	// outcome, as option slices, so that recording allocates none.
	// The key is {kind, operation, outcome}; kind is AttrKind's value, ""
	// for the mutex, whose sets have no AttrKind.
	sets map[[3]string]measureOpts
	// startOpts are the options of every span.
	startOpts []trace.SpanStartOption
}

// measureOpts are the options of one measurement, as the variadic slices
// of Record and Add.
type measureOpts struct {
	record []metric.RecordOption
	add    []metric.AddOption
}

// newInstruments creates the instruments of c; errors go to otel.Handle.
func newInstruments(c config) *instruments {
	m := c.mp.Meter(ScopeName)
	in := &instruments{
		tracer: c.tp.Tracer(ScopeName),
		keys:   c.keys,
		base:   append([]attribute.KeyValue{AttrBackend.String(c.backend)}, c.attrs...),
		sets:   map[[3]string]measureOpts{},
	}
	in.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(in.base...)}
	var err error
	if in.acquire, err = m.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"),
		metric.WithDescription("How long Acquire or TryAcquire took, by outcome: the wait for a lock."),
		metric.WithExplicitBucketBoundaries(acquireBuckets...)); err != nil {
		otel.Handle(fmt.Errorf("lockswap/otel: instrument %s: %w", MetricAcquireDuration, err))
	}
	if in.attempts, err = m.Int64Histogram(MetricAcquireAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts (requests to take the lock) one Acquire or TryAcquire made, by outcome."),
		metric.WithExplicitBucketBoundaries(attemptBuckets...)); err != nil {
		otel.Handle(fmt.Errorf("lockswap/otel: instrument %s: %w", MetricAcquireAttempts, err))
	}
	if in.hold, err = m.Float64Histogram(MetricHoldDuration, metric.WithUnit("s"),
		metric.WithDescription("How long a lock was held: from Acquire's return to the call of Release, or to the loss."),
		metric.WithExplicitBucketBoundaries(holdBuckets...)); err != nil {
		otel.Handle(fmt.Errorf("lockswap/otel: instrument %s: %w", MetricHoldDuration, err))
	}
	if in.extensions, err = m.Int64Counter(MetricExtensions, metric.WithUnit("{extension}"),
		metric.WithDescription("Extend calls, by outcome.")); err != nil {
		otel.Handle(fmt.Errorf("lockswap/otel: instrument %s: %w", MetricExtensions, err))
	}
	if in.lost, err = m.Int64Counter(MetricLocksLost, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks that ended before their holder released them, by the operation that saw it.")); err != nil {
		otel.Handle(fmt.Errorf("lockswap/otel: instrument %s: %w", MetricLocksLost, err))
	}
	if in.failures, err = m.Int64Counter(MetricReleaseFailures, metric.WithUnit("{release}"),
		metric.WithDescription("Release calls that failed other than with ErrLost, by outcome.")); err != nil {
		otel.Handle(fmt.Errorf("lockswap/otel: instrument %s: %w", MetricReleaseFailures, err))
	}
	// The API returns a usable instrument with most errors; a provider
	// that returns none gets one that records nothing.
	if in.acquire == nil {
		in.acquire = noop.Float64Histogram{}
	}
	if in.attempts == nil {
		in.attempts = noop.Int64Histogram{}
	}
	if in.hold == nil {
		in.hold = noop.Float64Histogram{}
	}
	if in.extensions == nil {
		in.extensions = noop.Int64Counter{}
	}
	if in.lost == nil {
		in.lost = noop.Int64Counter{}
	}
	if in.failures == nil {
		in.failures = noop.Int64Counter{}
	}
	outcomes := []string{OutcomeAcquired, OutcomeExtended, OutcomeReleased, OutcomeHeld, OutcomeLost,
		OutcomeInvalid, OutcomeClosed, OutcomeCancelled, OutcomeUnavailable, OutcomeFailed, OutcomeError, ""}
	for _, op := range []string{OpAcquire, OpTryAcquire, OpExtend, OpRelease, ""} {
		for _, oc := range outcomes {
			kv := append([]attribute.KeyValue(nil), in.base...)
			if op != "" {
				kv = append(kv, AttrOperation.String(op))
			}
			if oc != "" {
				kv = append(kv, AttrOutcome.String(oc))
			}
			for _, kind := range []string{"", KindSemaphore, KindRead, KindWrite} {
				kkv := kv
				if kind != "" {
					kkv = append(kkv[:len(kkv):len(kkv)], AttrKind.String(kind))
				}
				set := metric.WithAttributeSet(attribute.NewSet(kkv...))
				in.sets[[3]string{kind, op, oc}] = measureOpts{record: []metric.RecordOption{set}, add: []metric.AddOption{set}}
			}
		}
	}
	return in
}

// attrs returns the metric attributes for operation op and outcome oc ("":
// not recorded), of a call of kind (AttrKind's value, "" for the mutex).
func (in *instruments) attrs(kind, op, oc string) measureOpts {
	return in.sets[[3]string{kind, op, oc}]
}

// kindOf returns AttrKind's value for a call with opts: "" for the mutex.
func kindOf(opts []lockswap.Option) string {
	if len(opts) == 0 {
		return ""
	}
	o, _ := lockswap.Options{}.Resolve(opts...) // an invalid call still reads its options
	switch {
	case o.Permits != 0:
		return KindSemaphore
	case o.RW == lockswap.ReadHold:
		return KindRead
	case o.RW == lockswap.WriteHold:
		return KindWrite
	}
	return ""
}

// start starts the span of op, with the key when keys are recorded, and
// the kind of the call (AttrKind's value, "" for the mutex).
func (in *instruments) start(ctx context.Context, name, key string, kind string) (context.Context, trace.Span) {
	ctx, span := in.tracer.Start(ctx, name, in.startOpts...)
	if span.IsRecording() {
		if in.keys {
			span.SetAttributes(AttrKey.String(key))
		}
		if kind != "" {
			span.SetAttributes(AttrKind.String(kind))
		}
	}
	return ctx, span
}

// end ends span with outcome oc and, for a failure, an Error status.
func (in *instruments) end(span trace.Span, oc string, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(AttrOutcome.String(oc))
	switch oc {
	case OutcomeInvalid, OutcomeClosed, OutcomeUnavailable, OutcomeError, OutcomeLost:
		desc := oc
		if in.keys && err != nil {
			desc = err.Error()
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End()
}

// classify names the outcome of a call under ctx that returned err; ok is
// the outcome of a call that succeeded. Cancelled is decided by ctx, not
// by err: a backend's own request timeout also wraps
// context.DeadlineExceeded, and that is an outage, not a caller giving up.
func classify(ctx context.Context, err error, ok string) string {
	switch {
	case err == nil:
		return ok
	case ok != OutcomeAcquired && errors.Is(err, lockswap.ErrLost):
		return OutcomeLost
	case errors.Is(err, lockswap.ErrInvalid):
		return OutcomeInvalid
	case errors.Is(err, lockswap.ErrClosed):
		return OutcomeClosed
	case errors.Is(err, lockswap.ErrHeld):
		return OutcomeHeld
	case ctx.Err() != nil:
		return OutcomeCancelled
	case errors.Is(err, lockswap.ErrUnavailable):
		return OutcomeUnavailable
	}
	return OutcomeError
}

// locker is a Locker wrapped by Wrap.
type locker struct {
	inner lockswap.Locker
	in    *instruments
}

// Acquire is the wrapped Locker's Acquire, recorded.
func (l *locker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return l.acquire(ctx, OpAcquire, "lockswap.Acquire", key, opts, l.inner.Acquire)
}

// TryAcquire is the wrapped Locker's TryAcquire, recorded.
func (l *locker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	return l.acquire(ctx, OpTryAcquire, "lockswap.TryAcquire", key, opts, l.inner.TryAcquire)
}

type acquireFunc func(context.Context, string, ...lockswap.Option) (lockswap.Lock, error)

func (l *locker) acquire(ctx context.Context, op, name, key string, opts []lockswap.Option, fn acquireFunc) (lockswap.Lock, error) {
	kind := kindOf(opts)
	ctx, span := l.in.start(ctx, name, key, kind)
	// The kit counts the call's attempts in a counter its context carries
	// (driver.CountAttempts): made only when something records the count.
	var count *driver.Attempts
	callCtx := ctx
	if span.IsRecording() || l.in.attempts.Enabled(ctx) {
		callCtx, count = driver.CountAttempts(ctx)
	}
	start := time.Now()
	lk, err := fn(callCtx, key, opts...)
	took := time.Since(start)
	if err == nil && lk == nil {
		err = fmt.Errorf("otel: %s returned neither a lock nor an error", op)
	}
	oc := classify(ctx, err, OutcomeAcquired)
	set := l.in.attrs(kind, op, oc).record
	l.in.acquire.Record(ctx, took.Seconds(), set...)
	// A Locker that is not built with the kit counts nothing: no
	// attempts are recorded then, rather than a misleading 0.
	if n := count.Load(); n > 0 {
		l.in.attempts.Record(ctx, n, set...)
		if span.IsRecording() {
			span.SetAttributes(AttrAttempts.Int64(n))
		}
	}
	if err != nil {
		l.in.end(span, oc, err)
		return nil, err
	}
	if span.IsRecording() {
		if f, ok := lk.Fence(); ok && f <= math.MaxInt64 {
			span.SetAttributes(AttrFence.Int64(int64(f)))
		}
		span.SetAttributes(AttrTTL.Float64(lk.TTL().Seconds()))
		if slot, ok := lockswap.Slot(lk); ok {
			span.SetAttributes(AttrSlot.Int(slot))
		}
	}
	l.in.end(span, oc, nil)
	return &lock{Lock: lk, in: l.in, kind: kind, acquired: time.Now()}, nil
}

// Guarantees returns the wrapped Locker's Guarantees.
func (l *locker) Guarantees() lockswap.Guarantees { return l.inner.Guarantees() }

// Close closes the wrapped Locker.
func (l *locker) Close() error { return l.inner.Close() }

// Unwrap returns the wrapped Locker.
func (l *locker) Unwrap() lockswap.Locker { return l.inner }

// lock is a Lock of a wrapped Locker: its Extend and Release are recorded,
// its other methods are the wrapped Lock's.
type lock struct {
	lockswap.Lock
	in       *instruments
	kind     string // AttrKind's value, "" for the mutex
	acquired time.Time
	ended    atomic.Bool // the hold was recorded (released or lost)
}

// Unwrap returns the wrapped Lock.
func (l *lock) Unwrap() lockswap.Lock { return l.Lock }

// Extend is the wrapped Lock's Extend, recorded.
func (l *lock) Extend(ctx context.Context, ttl time.Duration) error {
	ctx, span := l.in.start(ctx, "lockswap.Extend", l.Key(), l.kind)
	err := l.Lock.Extend(ctx, ttl)
	oc := classify(ctx, err, OutcomeExtended)
	l.in.extensions.Add(ctx, 1, l.in.attrs(l.kind, "", oc).add...)
	if oc == OutcomeLost {
		l.endHold(ctx, OutcomeLost, OpExtend, time.Now())
	}
	l.in.end(span, oc, err)
	return err
}

// Release is the wrapped Lock's Release, recorded.
func (l *lock) Release(ctx context.Context) error {
	ctx, span := l.in.start(ctx, "lockswap.Release", l.Key(), l.kind)
	called := time.Now()
	first := !l.ended.Load()
	lostBefore := first && l.lostAlready(called)
	err := l.Lock.Release(ctx)
	oc := classify(ctx, err, OutcomeReleased)
	if oc != OutcomeReleased && oc != OutcomeLost {
		l.in.failures.Add(ctx, 1, l.in.attrs(l.kind, "", oc).add...)
	}
	if first {
		hold := OutcomeFailed
		switch {
		case lostBefore || oc == OutcomeLost:
			hold = OutcomeLost
		case oc == OutcomeReleased:
			hold = OutcomeReleased
		}
		l.endHold(ctx, hold, OpRelease, called)
	}
	l.in.end(span, oc, err)
	return err
}

// lostAlready reports whether the lock ended before Release was called:
// its Deadline passed, or Done was closed (the backend saw it lost).
func (l *lock) lostAlready(now time.Time) bool {
	if !now.Before(l.Deadline()) {
		return true
	}
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// endHold records the end of the hold, once per lock: its duration up to
// end (when Release was called, or the loss seen), and the loss seen by op
// when oc is lost. A lost lock's hold ends at its Deadline when that came
// first.
func (l *lock) endHold(ctx context.Context, oc, op string, end time.Time) {
	if !l.ended.CompareAndSwap(false, true) {
		return
	}
	if oc == OutcomeLost {
		if d := l.Deadline(); d.Before(end) {
			end = d
		}
		l.in.lost.Add(ctx, 1, l.in.attrs(l.kind, op, "").add...)
	}
	l.in.hold.Record(ctx, max(end.Sub(l.acquired), 0).Seconds(), l.in.attrs(l.kind, "", oc).record...)
}
