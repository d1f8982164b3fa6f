package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// A Logger makes the events a person must see visible: here a lock held
// past its deadline, reported when its holder releases it. Without a
// Logger the Locker writes nothing. (The handler drops the time and the
// overdue duration only so that the output is stable.)
func ExampleOptions_logger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "overdue" {
				return slog.Attr{}
			}
			return a
		},
	}))
	lk, err := memlock.NewWithOptions(memlock.NewStore(), memlock.Options{Logger: logger, LogKeys: true})
	if err != nil {
		panic(err)
	}
	defer lk.Close()
	ctx := context.Background()

	l, err := lk.Acquire(ctx, "nightly-report", lockswap.WithTTL(20*time.Millisecond))
	if err != nil {
		panic(err)
	}
	<-l.Done() // the work took longer than the TTL
	// The release returns nil, or ErrLost once the store's own entry has
	// expired too (it outlives the Deadline by the drift allowance).
	err = l.Release(ctx)
	fmt.Println("released or lost:", err == nil || errors.Is(err, lockswap.ErrLost))
	// Output:
	// level=WARN msg="lock lost" backend=memlock reason=expired key=nightly-report
	// released or lost: true
}
