package otel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

var backendMemlock = lockotel.AttrBackend.String("memlock")

// TestInstruments: every instrument has the documented name, kind, unit and
// a description, under the package's scope.
func TestInstruments(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	defer lk.Close()
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A lost lock (ttl passed) and a failed release (Locker closed).
	short, err := lk.TryAcquire(ctx, "short", lockswap.WithTTL(shortTTL))
	if err != nil {
		t.Fatal(err)
	}
	takeOver(t, unwrap(lk), "short")
	if err := short.Release(ctx); !errors.Is(err, lockswap.ErrLost) {
		t.Fatalf("Release after the TTL: %v, want ErrLost", err)
	}
	l, err = lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	lk.Close()
	if err := l.Release(ctx); !errors.Is(err, lockswap.ErrClosed) {
		t.Fatalf("Release after Close: %v, want ErrClosed", err)
	}

	ms := r.collect(t)
	for _, want := range []struct {
		name, unit string
		histogram  bool
	}{
		{lockotel.MetricAcquireDuration, "s", true},
		{lockotel.MetricAcquireAttempts, "{attempt}", true},
		{lockotel.MetricHoldDuration, "s", true},
		{lockotel.MetricExtensions, "{extension}", false},
		{lockotel.MetricLocksLost, "{lock}", false},
		{lockotel.MetricReleaseFailures, "{release}", false},
	} {
		m, ok := ms[want.name]
		if !ok {
			t.Errorf("no metric %s", want.name)
			continue
		}
		if m.Unit != want.unit {
			t.Errorf("%s: unit %q, want %q", want.name, m.Unit, want.unit)
		}
		if m.Description == "" {
			t.Errorf("%s has no description", want.name)
		}
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			if !want.histogram {
				t.Errorf("%s is a histogram, want a counter", want.name)
			}
			if len(d.DataPoints) > 0 && len(d.DataPoints[0].Bounds) == 0 {
				t.Errorf("%s has no bucket bounds", want.name)
			}
		case metricdata.Histogram[int64]:
			if !want.histogram {
				t.Errorf("%s is a histogram, want a counter", want.name)
			}
			if len(d.DataPoints) > 0 && len(d.DataPoints[0].Bounds) == 0 {
				t.Errorf("%s has no bucket bounds", want.name)
			}
		case metricdata.Sum[int64]:
			if want.histogram || !d.IsMonotonic {
				t.Errorf("%s is a sum (monotonic %v), want a histogram: %v", want.name, d.IsMonotonic, want.histogram)
			}
		default:
			t.Errorf("%s is a %T", want.name, m.Data)
		}
	}
	if len(ms) != 6 {
		t.Errorf("%d metrics, want the 6 documented", len(ms))
	}
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration, backendMemlock); n != 3 {
		t.Errorf("acquire durations for backend memlock: %d, want 3", n)
	}
}

// TestAcquireOutcomes: each call is one value of the acquire histogram with
// its operation and its outcome, and one span with the same outcome.
func TestAcquireOutcomes(t *testing.T) {
	r := newRecorder(t)
	store := memlock.NewStore()
	lk := r.wrap(memlock.New(store))
	ctx := context.Background()

	held, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire of a held key: %v", err)
	}
	// A wait that its deadline ends while the key is held: held (a
	// deadline a loaded machine does not pass before the first attempt).
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = lk.Acquire(wctx, "job")
	cancel()
	if !errors.Is(err, lockswap.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held key until the deadline: %v", err)
	}
	// A caller that gave up before its first attempt: cancelled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err = lk.Acquire(cctx, "free"); !errors.Is(err, context.Canceled) || errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}
	if _, err := lk.Acquire(ctx, ""); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("Acquire of an empty key: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := lk.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	lk.Close()
	if _, err := lk.TryAcquire(ctx, "other"); !errors.Is(err, lockswap.ErrClosed) {
		t.Fatalf("TryAcquire after Close: %v", err)
	}
	_ = l

	ms := r.collect(t)
	for _, c := range []struct {
		op, oc string
		want   uint64
	}{
		{lockotel.OpTryAcquire, lockotel.OutcomeAcquired, 1},
		{lockotel.OpTryAcquire, lockotel.OutcomeHeld, 1},
		{lockotel.OpTryAcquire, lockotel.OutcomeClosed, 1},
		{lockotel.OpAcquire, lockotel.OutcomeHeld, 1},
		{lockotel.OpAcquire, lockotel.OutcomeCancelled, 1},
		{lockotel.OpAcquire, lockotel.OutcomeInvalid, 1},
		{lockotel.OpAcquire, lockotel.OutcomeAcquired, 1},
	} {
		n, sum := histCount(t, ms, lockotel.MetricAcquireDuration, backendMemlock, operation(c.op), outcome(c.oc))
		if n != c.want {
			t.Errorf("%s %s: %d values, want %d", c.op, c.oc, n, c.want)
		}
		if sum < 0 {
			t.Errorf("%s %s: negative duration sum %v", c.op, c.oc, sum)
		}
	}
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration); n != 7 {
		t.Errorf("%d acquire values in all, want 7", n)
	}

	outcomes := map[string]int{}
	for _, s := range append(r.ended("lockswap.Acquire"), r.ended("lockswap.TryAcquire")...) {
		oc, _ := spanAttr(s, lockotel.AttrOutcome)
		outcomes[s.Name()+" "+oc.AsString()]++
		if b, _ := spanAttr(s, lockotel.AttrBackend); b.AsString() != "memlock" {
			t.Errorf("span %s: backend %q", s.Name(), b.AsString())
		}
		wantErr := oc.AsString() == lockotel.OutcomeInvalid || oc.AsString() == lockotel.OutcomeClosed
		if got := s.Status().Code == codes.Error; got != wantErr {
			t.Errorf("span %s %s: status %v", s.Name(), oc.AsString(), s.Status())
		}
		if oc.AsString() == lockotel.OutcomeAcquired {
			if f, ok := spanAttr(s, lockotel.AttrFence); !ok || f.AsInt64() < 1 {
				t.Errorf("span %s of an acquired lock: fence %v %v", s.Name(), f.AsInt64(), ok)
			}
			if ttl, _ := spanAttr(s, lockotel.AttrTTL); ttl.AsFloat64() != lockswap.DefaultTTL.Seconds() {
				t.Errorf("span %s: ttl %v, want %v", s.Name(), ttl.AsFloat64(), lockswap.DefaultTTL.Seconds())
			}
		}
	}
	want := map[string]int{
		"lockswap.TryAcquire acquired": 1, "lockswap.TryAcquire held": 1, "lockswap.TryAcquire closed": 1,
		"lockswap.Acquire held": 1, "lockswap.Acquire cancelled": 1, "lockswap.Acquire invalid": 1, "lockswap.Acquire acquired": 1,
	}
	if len(outcomes) != len(want) {
		t.Errorf("span outcomes %v, want %v", outcomes, want)
	}
	for k, n := range want {
		if outcomes[k] != n {
			t.Errorf("spans %q: %d, want %d (all: %v)", k, outcomes[k], n, outcomes)
		}
	}
}

// TestClassification: the outcome of every sentinel, and of errors that
// match two of them, as the package doc orders them.
func TestClassification(t *testing.T) {
	wrapped := func(errs ...error) error {
		var e error = errors.New("cause")
		for _, x := range errs {
			e = errors.Join(e, x)
		}
		return e
	}
	for _, c := range []struct {
		err                      error
		cancel                   bool // the caller's context ended
		acquire, extend, release string
	}{
		{nil, false, "acquired", "extended", "released"},
		{nil, true, "acquired", "extended", "released"},
		{lockswap.ErrHeld, false, "held", "held", "held"},
		{lockswap.ErrUnavailable, false, "unavailable", "unavailable", "unavailable"},
		{lockswap.ErrInvalid, false, "invalid", "invalid", "invalid"},
		{lockswap.ErrClosed, false, "closed", "closed", "closed"},
		{lockswap.ErrLost, false, "error", "lost", "lost"},
		{context.Canceled, true, "cancelled", "cancelled", "cancelled"},
		{context.DeadlineExceeded, true, "cancelled", "cancelled", "cancelled"},
		{wrapped(lockswap.ErrHeld, context.DeadlineExceeded), true, "held", "held", "held"},
		{wrapped(lockswap.ErrUnavailable, context.DeadlineExceeded), true, "cancelled", "cancelled", "cancelled"},
		// A backend's own request timeout, the caller's context alive: an outage.
		{wrapped(lockswap.ErrUnavailable, context.DeadlineExceeded), false, "unavailable", "unavailable", "unavailable"},
		{context.DeadlineExceeded, false, "error", "error", "error"},
		{wrapped(lockswap.ErrClosed, lockswap.ErrLost), false, "closed", "lost", "lost"},
		{errors.New("something else"), false, "error", "error", "error"},
	} {
		r := newRecorder(t)
		s := &stub{acquireErr: c.err}
		lk := r.wrap(s)
		ctx, cancel := context.WithCancel(context.Background())
		if c.cancel {
			cancel()
		}
		_, _ = lk.Acquire(ctx, "k")
		s.acquireErr = nil
		l, err := lk.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		s.extendErr, s.releaseErr = c.err, c.err
		_ = l.Extend(ctx, time.Second)
		_ = l.Release(ctx)
		cancel()

		ms := r.collect(t)
		stubAttr := lockotel.AttrBackend.String("stub")
		if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration, stubAttr, operation(lockotel.OpAcquire), outcome(c.acquire)); n != 1 {
			t.Errorf("%v: Acquire not recorded as %s", c.err, c.acquire)
		}
		if n := counter(t, ms, lockotel.MetricExtensions, stubAttr, outcome(c.extend)); n != 1 {
			t.Errorf("%v: Extend not recorded as %s", c.err, c.extend)
		}
		failures := counter(t, ms, lockotel.MetricReleaseFailures)
		if wantFail := c.release != "released" && c.release != "lost"; (failures == 1) != wantFail || failures > 1 {
			t.Errorf("%v: %d release failures, want failure %v", c.err, failures, wantFail)
		}
		if failures == 1 && counter(t, ms, lockotel.MetricReleaseFailures, outcome(c.release)) != 1 {
			t.Errorf("%v: release failure not recorded as %s", c.err, c.release)
		}
		rel := r.ended("lockswap.Release")
		if len(rel) != 1 {
			t.Fatalf("%d release spans", len(rel))
		}
		if oc, _ := spanAttr(rel[0], lockotel.AttrOutcome); oc.AsString() != c.release {
			t.Errorf("%v: release span outcome %q, want %q", c.err, oc.AsString(), c.release)
		}
	}
}

// TestHold: a released lock's hold is one value, from Acquire's return to
// Release; a second Release records nothing more.
func TestHold(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	defer lk.Close()
	ctx := context.Background()
	before := time.Now()
	l, err := lk.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(before).Seconds()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	ms := r.collect(t)
	n, sum := histCount(t, ms, lockotel.MetricHoldDuration, backendMemlock, outcome(lockotel.OutcomeReleased))
	if n != 1 || sum < 0 || sum > elapsed {
		t.Errorf("hold: %d values summing %vs, want one within the %vs from before Acquire to after Release", n, sum, elapsed)
	}
	if all, _ := histCount(t, ms, lockotel.MetricHoldDuration); all != 1 {
		t.Errorf("%d hold values, want 1", all)
	}
	if n := counter(t, ms, lockotel.MetricLocksLost); n != 0 {
		t.Errorf("%d locks lost, want 0", n)
	}
	if n := counter(t, ms, lockotel.MetricReleaseFailures); n != 0 {
		t.Errorf("%d release failures, want 0", n)
	}
	if rel := r.ended("lockswap.Release"); len(rel) != 2 {
		t.Errorf("%d release spans, want 2", len(rel))
	}
}

// TestDoRenewals: lockswap.Do's renewals go through the wrapped lock and
// are counted as extensions.
func TestDoRenewals(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	defer lk.Close()
	ctx := context.Background()
	err := lockswap.Do(ctx, lk, "job", func(ctx context.Context, _ lockswap.Lock) error {
		// Wait, bounded, until two renewals were recorded.
		limit := time.Now().Add(10 * time.Second)
		for counter(t, r.collect(t), lockotel.MetricExtensions, outcome(lockotel.OutcomeExtended)) < 2 {
			if time.Now().After(limit) {
				return errors.New("no two renewals within 10s")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	}, lockswap.WithTTL(2*time.Second), lockswap.WithRenewEvery(5*time.Millisecond)) // a TTL a loaded machine does not starve (60 ms could)
	if err != nil {
		t.Fatal(err)
	}
	ms := r.collect(t)
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, outcome(lockotel.OutcomeReleased)); n != 1 {
		t.Errorf("Do's hold: %d released values, want 1", n)
	}
}

// TestWrapKeepsLockAndLocker: the wrapped Locker and its locks answer as
// the ones they wrap, and Unwrap returns those.
func TestWrapKeepsLockAndLocker(t *testing.T) {
	r := newRecorder(t)
	inner := memlock.New(memlock.NewStore())
	lk := r.wrap(inner)
	if got := lk.(interface{ Unwrap() lockswap.Locker }).Unwrap(); got != lockswap.Locker(inner) {
		t.Errorf("Locker Unwrap = %v, want the wrapped Locker", got)
	}
	if lk.Guarantees().Backend != inner.Guarantees().Backend || lk.Guarantees().Fencing != inner.Guarantees().Fencing {
		t.Errorf("Guarantees %+v, want %+v", lk.Guarantees(), inner.Guarantees())
	}
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	il := l.(interface{ Unwrap() lockswap.Lock }).Unwrap()
	if l.Key() != il.Key() || l.Token() != il.Token() || l.TTL() != il.TTL() || !l.Deadline().Equal(il.Deadline()) || l.Done() != il.Done() {
		t.Error("the wrapped lock's Key, Token, TTL, Deadline or Done differ from the lock it wraps")
	}
	f1, ok1 := l.Fence()
	f2, ok2 := il.Fence()
	if f1 != f2 || ok1 != ok2 || !ok1 {
		t.Errorf("Fence %v %v, want %v %v", f1, ok1, f2, ok2)
	}
	if err := l.Extend(ctx, 2*time.Minute); err != nil || il.TTL() != 2*time.Minute {
		t.Errorf("Extend through the wrapper: %v, inner TTL %v", err, il.TTL())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-il.Done():
	default:
		t.Error("Release through the wrapper left the inner lock's Done open")
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrClosed) {
		t.Errorf("the wrapped Locker after Close: %v, want ErrClosed", err)
	}
}

// TestSpanIsParent: the wrapped Locker and Lock are called under the span
// of the call, so that the client spans below are its children.
func TestSpanIsParent(t *testing.T) {
	r := newRecorder(t)
	s := &stub{}
	lk := r.wrap(s)
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Extend(ctx, time.Second)
	_ = l.Release(ctx)
	var ended []string
	for _, sp := range r.spans.Ended() {
		ended = append(ended, sp.SpanContext().SpanID().String())
	}
	if len(s.spans) != 3 || len(ended) != 3 {
		t.Fatalf("%d calls, %d spans; want 3 and 3", len(s.spans), len(ended))
	}
	for i, sc := range s.spans {
		if !sc.IsValid() || sc.SpanID().String() != ended[i] {
			t.Errorf("call %d ran under span %v, want %s", i, sc.SpanID(), ended[i])
		}
	}
}

// TestNoKeyUnlessAsked: the key appears in no metric attribute, span name,
// attribute, status or event, unless WithKeys is given; then it is on the
// spans only.
func TestNoKeyUnlessAsked(t *testing.T) {
	const key = "customer-4711-secret-invoice"
	for _, withKeys := range []bool{false, true} {
		r := newRecorder(t)
		var opts []lockotel.Option
		if withKeys {
			opts = append(opts, lockotel.WithKeys())
		}
		lk := r.wrap(memlock.New(memlock.NewStore()), opts...)
		ctx := context.Background()
		// Every path: acquired, held (error naming the key), extended,
		// lost at extend and release, failure after Close.
		// Held for the second attempt even on a loaded machine, lost soon.
		l, err := lk.TryAcquire(ctx, key, lockswap.WithTTL(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lk.TryAcquire(ctx, key); err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("the held error does not name the key (the test needs one that does): %v", err)
		}
		<-l.Done()
		_ = l.Extend(ctx, time.Second)
		_ = l.Release(ctx)
		l, err = lk.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Extend(ctx, time.Minute)
		lk.Close()
		if err := l.Release(ctx); err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("the release error does not name the key: %v", err)
		}

		var rm metricdata.ResourceMetrics
		if err := r.reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, set := range attributeSets(m.Data) {
					for _, kv := range set.ToSlice() {
						if strings.Contains(kv.Value.Emit(), key) {
							t.Errorf("withKeys=%v: metric %s has the key in %s", withKeys, m.Name, kv.Key)
						}
					}
				}
			}
		}
		keyed := 0
		for _, s := range r.spans.Ended() {
			if v, ok := spanAttr(s, lockotel.AttrKey); ok && v.AsString() == key {
				keyed++
			}
			leaks := strings.Contains(s.Name(), key) || strings.Contains(s.Status().Description, key)
			for _, kv := range s.Attributes() {
				if kv.Key != lockotel.AttrKey && strings.Contains(kv.Value.Emit(), key) {
					leaks = true
				}
			}
			for _, ev := range s.Events() {
				leaks = leaks || strings.Contains(ev.Name, key)
				for _, kv := range ev.Attributes {
					leaks = leaks || strings.Contains(kv.Value.Emit(), key)
				}
			}
			if !withKeys && (leaks || keyed > 0) {
				t.Errorf("span %s carries the key without WithKeys", s.Name())
			}
		}
		if n := len(r.spans.Ended()); withKeys && keyed != n {
			t.Errorf("WithKeys: %d of %d spans carry lockswap.key", keyed, n)
		}
		if withKeys {
			var described bool
			for _, s := range r.spans.Ended() {
				described = described || strings.Contains(s.Status().Description, key)
			}
			if !described {
				t.Error("WithKeys: no failed span has the error text as its status description")
			}
		}
	}
}

// attributeSets returns the attribute sets of the data points of d.
func attributeSets(d metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch d := d.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, dp.Attributes)
		}
	}
	return out
}

// TestOptions: WithBackend names the backend and WithAttributes adds to
// every metric and span.
func TestOptions(t *testing.T) {
	r := newRecorder(t)
	team := attribute.String("team", "billing")
	lk := r.wrap(memlock.New(memlock.NewStore()), lockotel.WithBackend("mine"), lockotel.WithAttributes(team))
	defer lk.Close()
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ms := r.collect(t)
	mine := lockotel.AttrBackend.String("mine")
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration, mine, team); n != 1 {
		t.Errorf("acquire values with backend mine and team: %d, want 1", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, mine, team); n != 1 {
		t.Errorf("hold values with backend mine and team: %d, want 1", n)
	}
	for _, s := range r.spans.Ended() {
		if b, _ := spanAttr(s, lockotel.AttrBackend); b.AsString() != "mine" {
			t.Errorf("span %s: backend %q", s.Name(), b.AsString())
		}
		if v, _ := spanAttr(s, "team"); v.AsString() != "billing" {
			t.Errorf("span %s lacks team", s.Name())
		}
	}
}

// TestWrapNil: wrapping no Locker is a programming error, said at once.
func TestWrapNil(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "nil Locker") {
			t.Errorf("Wrap(nil) panicked with %v, want a message naming the nil Locker", p)
		}
	}()
	lockotel.Wrap(nil)
}
