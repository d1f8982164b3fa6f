package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestServesLockMetrics: after the workers ran, /metrics has the lock
// metrics of both outcomes the workers cause.
func TestServesLockMetrics(t *testing.T) {
	handler, locker, shutdown, err := setup()
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown()
	defer locker.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		work(ctx, locker)
	}()
	srv := httptest.NewServer(handler)
	defer srv.Close()
	want := []string{
		`lockswap_acquire_duration_seconds_count{lockswap_backend="memlock",lockswap_operation="acquire",lockswap_outcome="acquired"`,
		`lockswap_acquire_attempts_count{lockswap_backend="memlock",lockswap_operation="acquire",lockswap_outcome="acquired"`,
		`lockswap_hold_duration_seconds_bucket{lockswap_backend="memlock",lockswap_outcome="released"`,
	}
	limit := time.Now().Add(10 * time.Second)
	var body string
	for {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(body, w)
		}
		if ok {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("/metrics lacks %q after 10s:\n%s", want, body)
		}
		time.Sleep(10 * time.Millisecond) // poll the condition, bounded above
	}
	cancel()
	<-done
}
