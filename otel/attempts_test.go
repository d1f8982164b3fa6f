package otel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

// attemptValues returns the count, sum, min and max of the values the
// attempts histogram recorded with the attributes want.
func attemptValues(t *testing.T, ms map[string]metricdata.Metrics, want ...attribute.KeyValue) (n uint64, sum, lo, hi int64) {
	t.Helper()
	m, ok := ms[lockotel.MetricAcquireAttempts]
	if !ok {
		return 0, 0, 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 histogram", lockotel.MetricAcquireAttempts, m.Data)
	}
	for _, dp := range h.DataPoints {
		if !matches(dp.Attributes, want) {
			continue
		}
		if mn, ok := dp.Min.Value(); ok && (n == 0 || mn < lo) {
			lo = mn
		}
		if mx, ok := dp.Max.Value(); ok && (n == 0 || mx > hi) {
			hi = mx
		}
		n += dp.Count
		sum += dp.Sum
	}
	return n, sum, lo, hi
}

// TestAttempts: every Acquire and TryAcquire of a kit Locker records its
// attempts in lockswap.acquire.attempts ({attempt}) with its operation and
// outcome, and on its span as lockswap.attempts: a TryAcquire 1 whether
// the key was free or held; an Acquire that waited in the local queue
// until the holder's release woke it exactly 2.
func TestAttempts(t *testing.T) {
	r := newRecorder(t)
	inner := memlock.New(memlock.NewStore())
	lk := r.wrap(inner)
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	held, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.TryAcquire(ctx, "job"); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("TryAcquire of a held key: %v, want ErrHeld", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := lk.Acquire(ctx, "job", lockswap.WithRetry(lockswap.ConstantRetry(time.Hour)))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for inner.Parked("job") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("after 5s: the Acquire is not parked behind the holder")
		}
		time.Sleep(time.Millisecond)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	// Refused before any request: no attempt, nothing recorded.
	if _, err := lk.TryAcquire(ctx, ""); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("TryAcquire of an empty key: %v, want ErrInvalid", err)
	}

	ms := r.collect(t)
	if m := ms[lockotel.MetricAcquireAttempts]; m.Unit != "{attempt}" || m.Description == "" {
		t.Errorf("%s: unit %q, description %q; want {attempt} and a description", lockotel.MetricAcquireAttempts, m.Unit, m.Description)
	}
	for _, c := range []struct {
		op, oc        string
		n             uint64
		sum, min, max int64
	}{
		{lockotel.OpTryAcquire, lockotel.OutcomeAcquired, 1, 1, 1, 1},
		{lockotel.OpTryAcquire, lockotel.OutcomeHeld, 1, 1, 1, 1},
		{lockotel.OpAcquire, lockotel.OutcomeAcquired, 1, 2, 2, 2},
		{lockotel.OpTryAcquire, lockotel.OutcomeInvalid, 0, 0, 0, 0},
	} {
		n, sum, lo, hi := attemptValues(t, ms, backendMemlock, operation(c.op), outcome(c.oc))
		if n != c.n || sum != c.sum || lo != c.min || hi != c.max {
			t.Errorf("%s %s: %d values, sum %d, min %d, max %d; want %d, %d, %d, %d",
				c.op, c.oc, n, sum, lo, hi, c.n, c.sum, c.min, c.max)
		}
	}
	if n, _, _, _ := attemptValues(t, ms); n != 3 {
		t.Errorf("%d attempt values in all, want 3", n)
	}

	spans := map[string][]int64{}
	for _, s := range append(r.ended("lockswap.Acquire"), r.ended("lockswap.TryAcquire")...) {
		oc, _ := spanAttr(s, lockotel.AttrOutcome)
		k := s.Name() + " " + oc.AsString()
		if v, ok := spanAttr(s, lockotel.AttrAttempts); ok {
			spans[k] = append(spans[k], v.AsInt64())
		} else {
			spans[k] = append(spans[k], -1) // no attribute
		}
	}
	for k, want := range map[string]int64{
		"lockswap.TryAcquire acquired": 1, "lockswap.TryAcquire held": 1,
		"lockswap.Acquire acquired": 2, "lockswap.TryAcquire invalid": -1,
	} {
		if got := spans[k]; len(got) != 1 || got[0] != want {
			t.Errorf("spans %q: lockswap.attempts %v, want [%d] (-1: none)", k, got, want)
		}
	}
}

// TestAttemptsMetricsOnly: with a tracer that records nothing, the
// attempts are still counted for the histogram.
func TestAttemptsMetricsOnly(t *testing.T) {
	r := newRecorder(t)
	lk := lockotel.Wrap(memlock.New(memlock.NewStore()),
		lockotel.WithMeterProvider(r.mp), lockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
	defer lk.Close()
	l, err := lk.TryAcquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if n, sum, _, _ := attemptValues(t, r.collect(t), operation(lockotel.OpTryAcquire), outcome(lockotel.OutcomeAcquired)); n != 1 || sum != 1 {
		t.Errorf("attempts without a recording tracer: %d values, sum %d; want 1 and 1", n, sum)
	}
}

// TestAttemptsNotCountedRecordNothing: a Locker that is not built with
// the kit counts no attempts, and none are recorded (not a 0), on the
// histogram or the span.
func TestAttemptsNotCountedRecordNothing(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(&stub{})
	ctx := context.Background()
	l, err := lk.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ms := r.collect(t)
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration); n != 1 {
		t.Fatalf("acquire durations: %d, want 1 (the call was recorded)", n)
	}
	if n, _, _, _ := attemptValues(t, ms); n != 0 {
		t.Errorf("%d attempt values for a Locker that counts none, want 0", n)
	}
	for _, s := range r.ended("lockswap.TryAcquire") {
		if v, ok := spanAttr(s, lockotel.AttrAttempts); ok {
			t.Errorf("span of a Locker that counts no attempts has lockswap.attempts %v", v.AsInt64())
		}
	}
}
