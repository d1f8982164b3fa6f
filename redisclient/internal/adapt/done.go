package adapt

import (
	"context"

	"github.com/lockswap/lockswap/internal/attempt"
)

// WithDone returns ctx, or, for a context with a deadline that cannot be
// cancelled (no Done channel: the kit's request under a caller's
// context.Background), a context that also ends at that deadline, for a
// client that watches a context's Done, not its deadline, while it
// waits:
//
//   - rueidis, for a pipelined command's reply: it would wait past the
//     deadline (a Release under context.Background on a hung server took
//     12 s, rueidis's own timeouts, instead of lockswap.CleanupTimeout);
//   - go-redis, for a pooled connection when all of them are in use: it
//     keeps the deadline on its sockets, but waits for a connection until
//     its PoolTimeout (ReadTimeout + 1 s, or 30 s), however close the
//     deadline.
//
// A deadline at least attempt.MinShared away (for the kit's request:
// begun with that much to go, see attempt.SharedDeadline) shares its Done
// channel and timer with the process's other requests ending within the
// same attempt.Slot (and ends up to a Slot early) rather than taking a
// context.WithDeadline of its own: with the kit's acquire requests
// sharing theirs the same way, the median of singleredis's serial cycle
// on rueidis moved from 1.13 to 1.09 times the raw client's
// (docs/benchmarks.md, "Issue 31: one timer per 16 ms slot"). The
// returned function releases what it made.
func WithDone(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() != nil {
		return ctx, noCancel
	}
	if d, ok := ctx.Deadline(); ok {
		if sctx, ok := attempt.SharedDeadline(ctx, d); ok {
			return sctx, noCancel
		}
		return context.WithDeadline(ctx, d)
	}
	return ctx, noCancel
}

// noCancel is the CancelFunc of a context WithDone did not make.
func noCancel() {}
