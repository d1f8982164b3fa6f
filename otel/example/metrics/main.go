// Command metrics serves a wrapped Locker's metrics on /metrics for
// Prometheus to scrape, while a few workers take turns on one lock.
//
//	go run ./example/metrics -addr localhost:2112 &
//	curl -s localhost:2112/metrics | grep ^lockswap_
//
// It uses memlock so that it needs no server; a program of yours wraps its
// own Locker (singleredis, redlock, etcdlease, ...) the same way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
	lockotel "github.com/lockswap/lockswap/otel"
)

func main() {
	addr := flag.String("addr", "localhost:2112", "address to serve /metrics on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		log.Fatal(err)
	}
}

// run serves /metrics on addr and runs the workers until ctx ends.
func run(ctx context.Context, addr string) error {
	handler, locker, shutdown, err := setup()
	if err != nil {
		return err
	}
	defer shutdown()
	defer locker.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { work(ctx, locker) })
	}
	log.Printf("serving http://%s/metrics", addr)
	err = srv.ListenAndServe()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve /metrics: %w", err)
}

// setup returns the /metrics handler and a wrapped Locker that records
// into it, and a function that flushes and stops the MeterProvider.
func setup() (http.Handler, lockswap.Locker, func(), error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	locker := lockotel.Wrap(memlock.New(memlock.NewStore()), lockotel.WithMeterProvider(mp))
	shutdown := func() { _ = mp.Shutdown(context.Background()) }
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), locker, shutdown, nil
}

// work takes the shared lock, holds it briefly and releases it, until
// ctx ends: the workers wait for each other.
func work(ctx context.Context, locker lockswap.Locker) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		l, err := locker.Acquire(wctx, "report", lockswap.WithTTL(time.Second))
		cancel()
		if err != nil {
			continue // held until the timeout, or ctx ended: both recorded
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Millisecond): // the work: 3 workers sometimes wait past 50 ms
		}
		_ = l.Release(context.Background())
	}
}
