package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

// BenchmarkOverhead is what the wrapper adds to a TryAcquire and Release
// of memlock (the cheapest backend, so the largest share): raw, wrapped
// with no-op providers, and wrapped with the SDK (metrics aggregated,
// spans sampled and ended, exported nowhere).
//
//	cd otel && go test -run '^$' -bench Overhead -benchmem -count 5 .
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() {
		_ = mp.Shutdown(ctx)
		_ = tp.Shutdown(ctx)
	})
	for _, c := range []struct {
		name string
		wrap func(lockswap.Locker) lockswap.Locker
	}{
		{"raw", func(l lockswap.Locker) lockswap.Locker { return l }},
		{"noop", func(l lockswap.Locker) lockswap.Locker {
			return lockotel.Wrap(l, lockotel.WithMeterProvider(noop.NewMeterProvider()), lockotel.WithTracerProvider(tracenoop.NewTracerProvider()))
		}},
		{"sdk", func(l lockswap.Locker) lockswap.Locker {
			return lockotel.Wrap(l, lockotel.WithMeterProvider(mp), lockotel.WithTracerProvider(tp))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			lk := c.wrap(memlock.New(memlock.NewStore()))
			defer lk.Close()
			b.ReportAllocs()
			for b.Loop() {
				l, err := lk.TryAcquire(ctx, "job")
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
