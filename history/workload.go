package history

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
)

// Section runs one critical section of client under l, which it holds:
// it reads the register l.Key(), calls between (when not nil: a pause, or a
// fault a test injects while the lock is held), writes back the value plus
// one, and records the Op in rec. Requests carry l's fence (0 without
// one).
func Section(ctx context.Context, rec *Recorder, reg *Register, client int, l lockswap.Lock, between func(context.Context)) Op {
	fence, _ := l.Fence()
	op := Op{Client: client, Key: l.Key(), Token: l.Token(), Fence: fence, Call: rec.Now()}
	v, ok := reg.Read(op.Key, fence)
	if between != nil {
		between(ctx)
	}
	if ok {
		op.Read = v
		op.Wrote = reg.Write(op.Key, v+1, fence)
	}
	op.Return = rec.Now()
	op.Late = ended(l, rec.At(op.Return))
	rec.Add(op)
	return op
}

// ended reports whether l had ended at now: its Done channel was, or
// would have been, closed. The driver kit's locks say so without making
// the channel and its timer, or reading the clock again (most of what
// recording cost a memlock section); for others, Done.
func ended(l lockswap.Lock, now time.Time) bool {
	if e, ok := l.(interface{ EndedAt(time.Time) bool }); ok {
		return e.EndedAt(now)
	}
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// Workload runs critical sections from several clients at once.
type Workload struct {
	// Lockers are the clients, one each (typically one Locker per process
	// or per connection set, over the same servers).
	Lockers []lockswap.Locker
	// Keys are the locks taken, each guarding the register of its name;
	// each section picks one at random.
	Keys []string
	// Sections is how many sections each client runs.
	Sections int
	// TTL is the lock's TTL (0: the Locker's default).
	TTL time.Duration
	// Register is the protected resource (fenced or not).
	Register *Register
	// Recorder receives the Ops.
	Recorder *Recorder
	// Between, when set, runs inside every section between its read and
	// its write (see Section).
	Between func(ctx context.Context, client int, l lockswap.Lock)
}

// Run runs the workload until every client has run its sections or ctx
// ends. A client whose Acquire fails with ErrHeld or ErrUnavailable tries
// again after a short pause (retrying is what users do; the history only
// has the sections that held a lock). Run returns the clients' errors
// joined: an error of another class ends that client at once; when ctx
// ends, its error, with the last failure that was being retried.
func (w Workload) Run(ctx context.Context) error {
	if len(w.Lockers) == 0 || len(w.Keys) == 0 || w.Register == nil || w.Recorder == nil {
		return fmt.Errorf("history: a workload needs Lockers, Keys, a Register and a Recorder: %w", lockswap.ErrInvalid)
	}
	var opts []lockswap.Option
	if w.TTL > 0 {
		opts = append(opts, lockswap.WithTTL(w.TTL))
	}
	errs := make([]error, len(w.Lockers))
	var wg sync.WaitGroup
	for i, lk := range w.Lockers {
		wg.Go(func() { errs[i] = w.client(ctx, i, lk, opts) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Pauses between a client's attempts that failed with ErrHeld or
// ErrUnavailable, doubling from the first to the last.
const (
	retryFirst = time.Millisecond
	retryLast  = 100 * time.Millisecond
)

// client runs one client's sections.
func (w Workload) client(ctx context.Context, i int, lk lockswap.Locker, opts []lockswap.Option) error {
	pause := retryFirst
	var last error // the failure being retried
	for n := 0; n < w.Sections; {
		key := w.Keys[rand.IntN(len(w.Keys))]
		l, err := lk.Acquire(ctx, key, opts...)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return fmt.Errorf("history: client %d: %w", i, errors.Join(ctx.Err(), last))
		case errors.Is(err, lockswap.ErrHeld), errors.Is(err, lockswap.ErrUnavailable):
			last = err
			t := time.NewTimer(rand.N(pause) + pause/2)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			pause = min(2*pause, retryLast)
			continue
		default:
			return fmt.Errorf("history: client %d: %w", i, err)
		}
		pause, last = retryFirst, nil
		var between func(context.Context)
		if w.Between != nil {
			between = func(ctx context.Context) { w.Between(ctx, i, l) }
		}
		Section(ctx, w.Recorder, w.Register, i, l, between)
		n++
		if err := l.Release(ctx); err != nil {
			switch {
			case errors.Is(err, lockswap.ErrLost), errors.Is(err, lockswap.ErrUnavailable):
				// A lock lost before its release (the point of some
				// faults; the Op says Late when it was lost before the
				// write), or a release that could not be confirmed: the
				// lock ends at its TTL, and the history is unchanged.
			case ctx.Err() != nil:
				return fmt.Errorf("history: client %d: %w", i, ctx.Err())
			default:
				return fmt.Errorf("history: client %d: release: %w", i, err)
			}
		}
	}
	return nil
}
