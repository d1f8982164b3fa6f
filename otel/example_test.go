package otel_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

// Wrap a Locker and read what it recorded. Here the SDK's ManualReader
// stands in for a real exporter; without WithMeterProvider and
// WithTracerProvider, Wrap records with the global providers.
func ExampleWrap() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	locker := lockotel.Wrap(memlock.New(memlock.NewStore()), lockotel.WithMeterProvider(mp))
	defer locker.Close()

	l, err := locker.TryAcquire(ctx, "invoice-42")
	if err != nil {
		panic(err)
	}
	_, err = locker.TryAcquire(ctx, "invoice-42") // contention
	fmt.Println("second attempt:", err != nil)
	if err := l.Release(ctx); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			for _, dp := range h.DataPoints {
				oc, _ := dp.Attributes.Value(lockotel.AttrOutcome)
				fmt.Printf("%s (%s) %s: %d\n", m.Name, m.Unit, oc.AsString(), dp.Count)
			}
		}
	}
	// Unordered output:
	// second attempt: true
	// lockswap.acquire.duration (s) acquired: 1
	// lockswap.acquire.duration (s) held: 1
	// lockswap.hold.duration (s) released: 1
}

// Export the metrics to Prometheus: the OpenTelemetry Prometheus exporter
// registers them in a client_golang registry, which promhttp serves on
// /metrics. Durations become _seconds histograms, counters _total.
func ExampleWrap_prometheus() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(ctx)

	locker := lockotel.Wrap(memlock.New(memlock.NewStore()), lockotel.WithMeterProvider(mp))
	defer locker.Close()
	l, err := locker.TryAcquire(ctx, "invoice-42", lockswap.WithTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		panic(err)
	}
	if err := l.Release(ctx); err != nil {
		panic(err)
	}

	// A program serves this handler: http.Handle("/metrics", ...).
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "lockswap_") && !strings.Contains(line, "_bucket") && !strings.Contains(line, "_sum") {
			fmt.Println(line)
		}
	}
	// Output:
	// lockswap_acquire_attempts_count{lockswap_backend="memlock",lockswap_operation="try_acquire",lockswap_outcome="acquired"} 1
	// lockswap_acquire_duration_seconds_count{lockswap_backend="memlock",lockswap_operation="try_acquire",lockswap_outcome="acquired"} 1
	// lockswap_extensions_total{lockswap_backend="memlock",lockswap_outcome="extended"} 1
	// lockswap_hold_duration_seconds_count{lockswap_backend="memlock",lockswap_outcome="released"} 1
}
