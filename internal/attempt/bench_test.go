package attempt_test

import (
	"context"
	"testing"

	"github.com/lockswap/lockswap/internal/attempt"
)

// BenchmarkRequest measures what the kit's request context costs a
// request on the client's side, without a network: made for
// context.Background (the common caller), ended at a Locker's Close
// (EndAtClose, as an acquire's is), read as a pipelining client reads it
// (Done, Err and Deadline) and stopped ("request-cancellable": made for a
// context that can be cancelled); against context.WithTimeout made,
// read and cancelled the same way ("with-timeout"), what a client would
// make otherwise. Run:
//
//	go test -run '^$' -bench Request -cpu 1,2 ./internal/attempt/
func BenchmarkRequest(b *testing.B) {
	closing, closeAll := context.WithCancel(context.Background())
	d := attempt.NewDeadlines(closing)
	b.Cleanup(func() { closeAll(); d.Close() })
	// read reads ctx as a client would, and reports false when it has
	// ended (b.Fatal is not for RunParallel's goroutines).
	read := func(ctx context.Context) bool {
		for range 3 {
			if ctx.Err() != nil {
				return false
			}
			select {
			case <-ctx.Done(): // a client's select beside its reply
				return false
			default:
			}
		}
		_, ok := ctx.Deadline()
		return ok
	}
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r := attempt.New(context.Background(), attempt.Timeout).EndAtClose(d)
				if !read(r) {
					b.Error("the request ended at once")
				}
				r.Stop()
			}
		})
	})
	// A caller whose context can be cancelled (a server's request
	// context): the request has a channel of its own, and watches the
	// caller's context from Watch on.
	parent, cancelParent := context.WithCancel(context.Background())
	b.Cleanup(cancelParent)
	b.Run("request-cancellable", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r := attempt.New(parent, attempt.Timeout).EndAtClose(d)
				if !read(r) {
					b.Error("the request ended at once")
				}
				r.Stop()
			}
		})
	})
	b.Run("with-timeout", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, cancel := context.WithTimeout(context.Background(), attempt.Timeout)
				if !read(ctx) {
					b.Error("the context ended at once")
				}
				cancel()
			}
		})
	})
}
