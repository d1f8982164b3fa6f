package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

// TestPermitsHaveAKind: a counting semaphore's permits are recorded with
// lockswap.kind=semaphore (and their spans with the slot), while the
// mutex's series keep exactly the attributes they had: no kind.
func TestPermitsHaveAKind(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	defer lk.Close()
	ctx := context.Background()
	for _, opts := range [][]lockswap.Option{nil, {lockswap.WithPermits(3)}} {
		l, err := lk.TryAcquire(ctx, "job", opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ms := r.collect(t)
	sem := lockotel.AttrKind.String(lockotel.KindSemaphore)
	if n, _ := histCount(t, ms, lockotel.MetricAcquireDuration, backendMemlock, sem); n != 1 {
		t.Errorf("acquire durations with kind=semaphore: %d, want 1 (the permit's)", n)
	}
	if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, backendMemlock, sem); n != 1 {
		t.Errorf("hold durations with kind=semaphore: %d, want 1", n)
	}
	// The mutex's data point has exactly the attributes it had before
	// semaphores: backend, operation and outcome.
	h, ok := ms[lockotel.MetricAcquireDuration].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatal("no acquire histogram")
	}
	mutexPoints := 0
	for _, dp := range h.DataPoints {
		if _, ok := dp.Attributes.Value(lockotel.AttrKind); !ok {
			mutexPoints++
			if dp.Attributes.Len() != 3 {
				t.Errorf("the mutex's acquire series has attributes %v, want backend, operation and outcome only", dp.Attributes.ToSlice())
			}
		}
	}
	if mutexPoints != 1 {
		t.Errorf("%d acquire series without a kind, want the mutex's one", mutexPoints)
	}
	spans := r.ended("lockswap.TryAcquire")
	var kinds []string
	for _, s := range spans {
		k, _ := spanAttr(s, lockotel.AttrKind)
		slot, hasSlot := spanAttr(s, lockotel.AttrSlot)
		kinds = append(kinds, k.AsString())
		if (k.AsString() == lockotel.KindSemaphore) != hasSlot || hasSlot && slot.AsInt64() != 0 {
			t.Errorf("span kind %q has slot %v (%v): want slot 0 on the permit's span only", k.AsString(), slot.AsInt64(), hasSlot)
		}
	}
	if len(kinds) != 2 || kinds[0] != "" || kinds[1] != lockotel.KindSemaphore {
		t.Errorf("TryAcquire spans' kinds = %q, want none for the mutex and semaphore for the permit", kinds)
	}
	for _, s := range r.ended("lockswap.Release") {
		if k, _ := spanAttr(s, lockotel.AttrKind); k.AsString() == lockotel.KindSemaphore {
			return
		}
	}
	t.Error("no Release span with kind=semaphore: the permit's release must carry it")
}

// TestRWHoldsHaveAKind: read and write holds are recorded with
// lockswap.kind=read and =write, on metrics and on the spans of their
// acquire and release.
func TestRWHoldsHaveAKind(t *testing.T) {
	r := newRecorder(t)
	lk := r.wrap(memlock.New(memlock.NewStore()))
	defer lk.Close()
	ctx := context.Background()
	for _, opt := range []lockswap.Option{lockswap.WithRead(), lockswap.WithWrite()} {
		l, err := lk.TryAcquire(ctx, "doc", opt)
		if err != nil {
			t.Fatal(err)
		}
		if m := lockswap.ModeOf(l); m == lockswap.NotRW {
			t.Errorf("the wrapped hold's ModeOf = %v: the wrapper must unwrap", m)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ms := r.collect(t)
	for _, kind := range []string{lockotel.KindRead, lockotel.KindWrite} {
		if n, _ := histCount(t, ms, lockotel.MetricHoldDuration, backendMemlock, lockotel.AttrKind.String(kind)); n != 1 {
			t.Errorf("hold durations with kind=%s: %d, want 1", kind, n)
		}
	}
	for _, name := range []string{"lockswap.TryAcquire", "lockswap.Release"} {
		var kinds []string
		for _, s := range r.ended(name) {
			k, _ := spanAttr(s, lockotel.AttrKind)
			kinds = append(kinds, k.AsString())
		}
		if len(kinds) != 2 || kinds[0] != lockotel.KindRead || kinds[1] != lockotel.KindWrite {
			t.Errorf("%s spans' kinds = %q, want read, then write", name, kinds)
		}
	}
}
