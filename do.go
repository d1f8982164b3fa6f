package lockswap

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// ErrMaxHold is the cause of fn's context ending in [Do] when the maximum
// hold time ([WithMaxHold]) was reached.
var ErrMaxHold = errors.New("maximum lock hold time reached")

// Do acquires the lock on key (waiting per opts), runs fn while renewing the
// lock in the background, then releases it.
//
// Renewal extends the lock by its TTL about every TTL/3. If renewal fails,
// fn's context is cancelled, with a cause matching [ErrLost], before the
// lock's deadline: fn must stop touching the protected resource when its
// context ends. Renewal stops synchronously when fn returns, before the
// release. With [WithMaxHold], renewal stops after that total and fn's
// context is cancelled with cause [ErrMaxHold] before the lock can lapse.
//
// Do returns fn's error, joined with an error matching [ErrLost] when the
// lock was lost while fn ran, or an acquire error. A failed release of a
// lock that was not lost is returned too. A nil ctx, locker or fn is an
// error matching [ErrInvalid], and nothing is acquired.
func Do(ctx context.Context, locker Locker, key string, fn func(ctx context.Context, l Lock) error, opts ...Option) (err error) {
	switch {
	case ctx == nil:
		return fmt.Errorf("lockswap.Do %q: ctx is a nil context.Context (pass context.Background(), or better one with a deadline): %w", key, ErrInvalid)
	case isNil(locker):
		return fmt.Errorf("lockswap.Do %q: locker is a nil Locker: %w", key, ErrInvalid)
	case fn == nil:
		return fmt.Errorf("lockswap.Do %q: fn is a nil function: %w", key, ErrInvalid)
	}
	o, err := Options{}.Resolve(opts...)
	if err != nil {
		return fmt.Errorf("lockswap.Do %q: %w", key, err)
	}
	l, err := locker.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	// Renew with the TTL the lock was really taken with (the Locker's
	// default unless WithTTL was given).
	if ttl := l.TTL(); ttl > 0 {
		o.TTL = ttl
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	r := &renewer{lock: l, ttl: o.TTL, every: o.RenewEvery, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	if r.every <= 0 {
		r.every = o.TTL / 3
	}
	if o.MaxHold > 0 {
		r.until = time.Now().Add(o.MaxHold)
	}
	go r.run(fnCtx)

	finished := false
	defer func() {
		if !finished { // fn panicked: stop renewing and release before the panic goes on
			close(r.stop)
			<-r.done
			cctx, ccancel := cleanupContext(ctx)
			l.Release(cctx)
			ccancel()
		}
	}()
	fnErr := fn(fnCtx, l)
	finished = true

	close(r.stop)
	<-r.done // renewal has stopped before we release
	relErr := l.Release(ctx)
	if r.lost != nil {
		return errors.Join(fnErr, r.lost)
	}
	if relErr != nil && !errors.Is(relErr, ErrLost) {
		return errors.Join(fnErr, fmt.Errorf("lockswap.Do: release: %w", relErr))
	}
	if relErr != nil {
		// Renewal did not notice, but the lock was gone by the end.
		return errors.Join(fnErr, fmt.Errorf("lockswap.Do %q: lock lost before fn returned: %w", key, relErr))
	}
	return fnErr
}

// renewer extends a lock until told to stop, and cancels the work's context
// before the lock's deadline when it cannot, or when the maximum hold time
// is reached.
type renewer struct {
	lock   Lock
	ttl    time.Duration
	every  time.Duration
	until  time.Time // zero: no maximum hold time
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	lost   error // set before done is closed
}

// margin is how long before the lock's deadline the work is cancelled when
// renewal has not succeeded: enough for fn to notice and stop.
func (r *renewer) margin() time.Duration {
	m := r.ttl / 10
	if m > time.Second {
		m = time.Second
	}
	return m
}

func (r *renewer) run(ctx context.Context) {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	nextRenew := time.Now().Add(r.every)
	for {
		// Wake for the next renewal, the last moment fn may run without a
		// successful renewal, or the end of the maximum hold time,
		// whichever comes first.
		cancelAt := r.lock.Deadline().Add(-r.margin())
		wake := nextRenew
		if cancelAt.Before(wake) {
			wake = cancelAt
		}
		if !r.until.IsZero() && r.until.Before(wake) {
			wake = r.until
		}
		timer.Reset(time.Until(wake))
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		case <-r.lock.Done():
			r.fail(fmt.Errorf("lockswap.Do %q: lock lost: %w", r.lock.Key(), ErrLost))
			return
		case <-timer.C:
		}
		now := time.Now()
		if !r.until.IsZero() && !now.Before(r.until) {
			// Maximum hold time: stop renewing and end the work.
			r.cancel(ErrMaxHold)
			return
		}
		if !now.Before(cancelAt) {
			r.fail(fmt.Errorf("lockswap.Do %q: renewal did not succeed before the deadline: %w", r.lock.Key(), ErrLost))
			return
		}
		if now.Before(nextRenew) {
			continue
		}
		ectx, ecancel := context.WithDeadline(context.WithoutCancel(ctx), cancelAt)
		err := r.lock.Extend(ectx, r.ttl)
		ecancel()
		switch {
		case err == nil:
			nextRenew = time.Now().Add(r.every)
		case errors.Is(err, ErrLost):
			r.fail(fmt.Errorf("lockswap.Do %q: renewal: %w", r.lock.Key(), err))
			return
		default:
			// Transient (outage): try again soon, within the current validity.
			nextRenew = time.Now().Add(r.every / 4)
		}
	}
}

func (r *renewer) fail(err error) {
	r.lost = err
	r.cancel(err)
}

// isNil reports whether l is nil or holds a nil pointer (a *redlock.Locker
// that was never opened), whose methods would panic.
func isNil(l Locker) bool {
	if l == nil {
		return true
	}
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
