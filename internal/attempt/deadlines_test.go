package attempt_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/attempt"
)

// TestDeadlinesShareTheSlot: the requests of one Locker whose callers'
// contexts cannot be cancelled and that end within the same slot share
// one Done channel, which closes at the earliest one Slot before their
// Deadline (timers never fire early) and then reads DeadlineExceeded; a
// request with a cancellable caller, or begun with less than MinShared
// to its deadline, has a channel of its own. The slot's timer is gone once it has fired.
func TestDeadlinesShareTheSlot(t *testing.T) {
	t.Parallel()
	dl := attempt.NewDeadlines(context.Background())
	defer dl.Close()
	now := time.Now()
	bg := context.Background()
	max := attempt.MinShared + attempt.MinShared/2
	r1 := attempt.OnceAt(new(attempt.Request), bg, now, max).EndAtClose(dl)
	r2 := attempt.OnceAt(new(attempt.Request), bg, now, max).EndAtClose(dl)
	defer r1.Stop()
	defer r2.Stop()
	if r1.Done() == nil || r1.Done() != r2.Done() {
		t.Fatalf("two requests ending in the same slot: Done %v and %v, want one shared channel", r1.Done(), r2.Done())
	}
	parent, cancel := context.WithCancel(bg)
	defer cancel()
	own := attempt.OnceAt(new(attempt.Request), parent, now, max).EndAtClose(dl)
	short := attempt.OnceAt(new(attempt.Request), bg, now, attempt.MinShared/2).EndAtClose(dl)
	defer own.Stop()
	defer short.Stop()
	for name, r := range map[string]*attempt.Request{"a cancellable caller's": own, "a short one's": short} {
		if d := r.Done(); d == nil || d == r1.Done() {
			t.Errorf("%s request: Done %v, want a channel of its own (shared: %v)", name, d, r1.Done())
		}
	}
	if got := attempt.Pending(dl); got != 1 {
		t.Errorf("%d slots pending, want 1", got)
	}
	select {
	case <-r1.Done():
	case <-time.After(max + 10*time.Second):
		t.Fatal("the shared Done not closed 10 s after the deadline")
	}
	deadline, _ := r1.Deadline()
	if early := deadline.Sub(time.Now()); early > attempt.Slot {
		t.Errorf("the shared Done closed %v before the deadline, more than a slot (%v)", early, attempt.Slot)
	}
	for _, r := range []*attempt.Request{r1, r2} {
		if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err = %v after the slot closed, want DeadlineExceeded", err)
		}
	}
	if got := attempt.Pending(dl); got != 0 {
		t.Errorf("%d slots pending after the slot fired, want 0", got)
	}
	// Err keeps its first value: a Close after the slot ended changes
	// nothing.
	dl.Close()
	if err := r1.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err = %v after the slot closed and then Close, want DeadlineExceeded still", err)
	}
}

// TestDeadlinesStopAndClose: a stopped request that shares its slot's
// channel keeps it open (for the others) and reads nil, as a context must
// while its Done is open; Close closes every channel handed out at once
// and stops every timer, and a request made afterwards has ended already.
func TestDeadlinesStopAndClose(t *testing.T) {
	closing, closeNow := context.WithCancel(context.Background())
	dl := attempt.NewDeadlines(closing)
	bg := context.Background()
	stopped := attempt.New(bg, time.Minute).EndAtClose(dl)
	running := attempt.New(bg, 2*time.Minute).EndAtClose(dl)
	if err := running.Err(); err != nil {
		t.Fatalf("Err = %v for a running request, want nil", err)
	}
	stopped.Stop()
	select {
	case <-stopped.Done():
		t.Error("Stop closed the slot's shared channel")
	default:
	}
	if err := stopped.Err(); err != nil {
		t.Errorf("Err = %v after Stop with Done open, want nil", err)
	}
	closeNow()
	dl.Close()
	checkEnded(t, stopped, context.Canceled, "after Stop and Close")
	checkEnded(t, running, context.Canceled, "after Close returned")
	if got := attempt.Pending(dl); got != 0 {
		t.Errorf("%d slots pending after Close, want 0", got)
	}
	late := attempt.New(bg, time.Minute).EndAtClose(dl)
	checkEnded(t, late, context.Canceled, "for a request made after Close")
	running.Stop()
	late.Stop()
}

// checkEnded fails t unless r's Done is closed and its Err matches want.
func checkEnded(t *testing.T, r *attempt.Request, want error, when string) {
	t.Helper()
	select {
	case <-r.Done():
	default:
		t.Errorf("Done still open %s", when)
	}
	if err := r.Err(); !errors.Is(err, want) {
		t.Errorf("Err = %v %s, want %v", err, when, want)
	}
}

// TestDeadlinesConcurrentClose: requests made, asked and stopped on many
// goroutines while the Locker closes all end (run with -race).
func TestDeadlinesConcurrentClose(t *testing.T) {
	closing, closeNow := context.WithCancel(context.Background())
	dl := attempt.NewDeadlines(closing)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range 200 {
				r := attempt.New(context.Background(), time.Duration(1+g*200+i)*time.Second).EndAtClose(dl)
				d := r.Done()
				_ = r.Err()
				if i%2 == 0 {
					r.Stop()
					continue
				}
				select {
				case <-d:
				case <-time.After(10 * time.Second):
					t.Error("a request still running 10 s after Close")
					return
				}
				if err := r.Err(); !errors.Is(err, context.Canceled) {
					t.Errorf("Err = %v after Close, want Canceled", err)
				}
				r.Stop()
			}
		}()
	}
	close(start)
	closeNow()
	dl.Close()
	wg.Wait()
	if got := attempt.Pending(dl); got != 0 {
		t.Errorf("%d slots pending after Close, want 0", got)
	}
}

type sharedKey struct{}

// TestSharedDeadline: a context that cannot be cancelled, with a deadline
// at least MinShared away, gets a context sharing its slot's Done channel
// with the others that end in the same slot, which keeps the values,
// reports the deadline, closes at the earliest one Slot before it and
// then reads DeadlineExceeded; a cancellable context or a nearer deadline
// (for the kit's request: one begun with less than MinShared to it) is
// left to the caller.
func TestSharedDeadline(t *testing.T) {
	t.Parallel()
	parent := context.WithValue(context.Background(), sharedKey{}, "v")
	d := time.Now().Add(attempt.MinShared + attempt.MinShared/2)
	c1, ok1 := attempt.SharedDeadline(parent, d)
	c2, ok2 := attempt.SharedDeadline(parent, d)
	if !ok1 || !ok2 || c1.Done() == nil || c1.Done() != c2.Done() {
		t.Fatalf("SharedDeadline: ok %v %v, Done %v and %v; want one shared channel", ok1, ok2, c1.Done(), c2.Done())
	}
	if got, _ := c1.Deadline(); !got.Equal(d) {
		t.Errorf("Deadline = %v, want %v", got, d)
	}
	if c1.Value(sharedKey{}) != "v" || c1.Err() != nil {
		t.Errorf("Value = %v, Err = %v; want the parent's value and nil", c1.Value(sharedKey{}), c1.Err())
	}
	cancellable, cancel := context.WithCancel(parent)
	defer cancel()
	if c, ok := attempt.SharedDeadline(cancellable, d); ok || c != cancellable {
		t.Error("SharedDeadline took a context that can be cancelled")
	}
	if c, ok := attempt.SharedDeadline(parent, time.Now().Add(attempt.MinShared/2)); ok || c != parent {
		t.Error("SharedDeadline took a deadline nearer than MinShared")
	}
	// The kit's request (as the rueidis adapter gets it for a release
	// under context.Background) is judged by the time from its start to
	// its deadline, which it knows, without reading the clock.
	// A request begun a second ago with 1.5 s to go has half a second
	// left and is shared all the same; asked for another deadline than
	// its own, SharedDeadline reads the clock.
	for _, c := range []struct {
		name     string
		begun    time.Duration // before now
		max      time.Duration
		otherEnd bool
		want     bool
	}{
		{"begun with MinShared/2", 0, attempt.MinShared / 2, false, false},
		{"begun with 1.5 MinShared", 0, attempt.MinShared + attempt.MinShared/2, false, true},
		{"begun with 1.5 MinShared, MinShared ago", attempt.MinShared, attempt.MinShared + attempt.MinShared/2, false, true},
		{"the same, asked for another deadline", attempt.MinShared, attempt.MinShared + attempt.MinShared/2, true, false},
	} {
		r := attempt.OnceAt(new(attempt.Request), parent, time.Now().Add(-c.begun), c.max)
		rd, _ := r.Deadline()
		if c.otherEnd {
			rd = rd.Add(-time.Millisecond)
		}
		sc, ok := attempt.SharedDeadline(r, rd)
		if ok != c.want || ok && (sc.Done() == nil || sc.Value(sharedKey{}) != "v") {
			t.Errorf("SharedDeadline of a request %s: ok %v, Done %v, want ok %v with the request's values", c.name, ok, sc.Done(), c.want)
		}
		r.Stop()
	}
	select {
	case <-c1.Done():
	case <-time.After(time.Until(d) + 10*time.Second):
		t.Fatal("the shared Done not closed 10 s after the deadline")
	}
	if early := d.Sub(time.Now()); early > attempt.Slot {
		t.Errorf("the shared Done closed %v before the deadline, more than a slot (%v)", early, attempt.Slot)
	}
	if err := c2.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err = %v after the slot closed, want DeadlineExceeded", err)
	}
}

// TestDeadlinesCloseRacingTheTimer: a slot whose timer has fired while its
// fire waits for the Deadlines' lock is closed by Close all the same (so
// that every channel is closed when the Locker's Close returns) and reads
// Canceled; the late fire then changes nothing and does not panic on a
// closed channel.
func TestDeadlinesCloseRacingTheTimer(t *testing.T) {
	t.Parallel()
	closing, cancel := context.WithCancel(context.Background())
	dl := attempt.NewDeadlines(closing)
	end := time.Now().Add(2 * attempt.MinShared)
	fire := attempt.FiredLate(dl, end)
	done, why := attempt.SlotOf(dl, end)
	cancel()
	dl.Close()
	select {
	case <-done:
	default:
		t.Fatal("the slot's channel is open after Close")
	}
	if err := why(); !errors.Is(err, context.Canceled) {
		t.Errorf("the slot reads %v after Close, want Canceled", err)
	}
	fire()
	if err := why(); !errors.Is(err, context.Canceled) {
		t.Errorf("the slot reads %v after its late fire, want Canceled still", err)
	}
	if got := attempt.Pending(dl); got != 0 {
		t.Errorf("%d slots pending after Close, want 0", got)
	}
}

// TestDeadlinesFarEnd: an end too far away to count in a time.Duration
// from the slots' origin takes a slot that is open (not one already
// expired, as an overflow would give) and closes at Close.
func TestDeadlinesFarEnd(t *testing.T) {
	t.Parallel()
	dl := attempt.NewDeadlines(context.Background())
	done, why := attempt.SlotOf(dl, time.Now().Add(math.MaxInt64))
	if err := why(); err != nil {
		t.Errorf("a slot ~292 years away reads %v, want nil (open)", err)
	}
	dl.Close()
	select {
	case <-done:
	default:
		t.Fatal("the far slot's channel is open after Close")
	}
}

// TestDeadlinesWallClockEnd: an end without a monotonic clock reading (a
// deadline from time.Date, say) counts from now on the wall clock, not
// from the wall time of the slots' origin: with the wall clock stepped an
// hour ahead since the origin, an end 2 s from now is 2 s from now on the
// monotonic clock, where the slot's timer waits (counted from the
// origin's wall time it would be an hour and 2 s, past the end). And
// while the wall clock has not stepped, such an end takes the slot the
// same end with a monotonic reading takes.
func TestDeadlinesWallClockEnd(t *testing.T) {
	t.Parallel()
	elapsed := 5 * time.Minute // since the origin, on the monotonic clock
	stepped := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := attempt.WallSince(stepped.Add(2*time.Second), stepped, elapsed), elapsed+2*time.Second; got != want {
		t.Errorf("an end 2 s after a stepped wall clock's now: %v from the origin, want %v", got, want)
	}
	if got := attempt.WallSince(stepped.Add(math.MaxInt64), stepped, elapsed); got != math.MaxInt64 {
		t.Errorf("an end too far to count: %v from the origin, want the largest Duration", got)
	}

	dl := attempt.NewDeadlines(context.Background())
	defer dl.Close()
	// The middle of a slot 2 s away: the two branches agree unless the
	// wall clock steps by half a slot between them.
	k := time.Since(attempt.SlotBase)/attempt.Slot + 2*time.Second/attempt.Slot
	end := attempt.SlotBase.Add(k*attempt.Slot + attempt.Slot/2)
	mono, _ := attempt.SlotOf(dl, end)
	wall, why := attempt.SlotOf(dl, end.Round(0))
	if wall != mono {
		t.Errorf("an end without a monotonic reading took another slot than the same end with one")
	}
	if err := why(); err != nil {
		t.Errorf("its slot reads %v, want nil (open)", err)
	}
}
