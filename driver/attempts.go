package driver

import (
	"context"
	"sync/atomic"
)

// Attempts counts the attempts one Acquire or TryAcquire call of a kit
// Locker made: the requests to the backend to take the lock. Get one with
// [CountAttempts]. An attempt is
//
//   - a TryAcquire's one call of the driver's Acquire;
//   - each call of the driver's Acquire in Acquire's waiting loop (the
//     retry policy's, or the local queue's head trying again when a lock
//     of the same Locker is released);
//   - an attempt a releasing holder of the same Locker made on the
//     waiter's behalf, in the request that released its own lock
//     ([HandOver]): it counts for the waiter, when the waiter receives its
//     result;
//   - each call of a [Waiter]'s Wait, which joins the backend's queue and
//     waits there without polling: an Acquire that waits behind a holder
//     and then gets the lock counts 1.
//
// A redlock attempt is one round to all of its instances, counted once. A
// call refused before any request (a closed Locker, an invalid key or
// option, a context already ended) counts 0; the releases the kit makes to
// give back a lock nobody will hold are not attempts. A Locker that is not
// built with the kit counts nothing, unless it passes the context on to
// kit Lockers: migrate's dual phase passes it to both of its backends, so
// one of its calls counts the attempts of both.
//
// Its methods are safe for concurrent use; a nil *Attempts counts nothing
// and loads 0.
type Attempts struct {
	n      atomic.Int64
	parent *Attempts // the counter of an enclosing CountAttempts, or nil
}

// attemptsKey is the context key of the *Attempts of a call.
type attemptsKey struct{}

// CountAttempts returns a context derived from ctx that carries a new
// counter, and the counter: the kit adds to it every attempt made for a
// call given that context (or one derived from it), from any Locker built
// with the kit. Call it once per call whose attempts are to be counted
// separately (lockswap/otel does, for every Acquire and TryAcquire), and
// read the counter with [Attempts.Load] once the call returned. When ctx
// already carries a counter, attempts counted by the new one are also
// counted by that one, so wrappers nest. A call whose context carries no
// counter costs the kit one context lookup and nothing else.
func CountAttempts(ctx context.Context) (context.Context, *Attempts) {
	a := &Attempts{parent: attemptsOf(ctx)}
	return context.WithValue(ctx, attemptsKey{}, a), a
}

// Load returns the number of attempts counted so far.
func (a *Attempts) Load() int64 {
	if a == nil {
		return 0
	}
	return a.n.Load()
}

// add counts one attempt in a and in the counters it is nested in.
func (a *Attempts) add() {
	for ; a != nil; a = a.parent {
		a.n.Add(1)
	}
}

// attemptsOf returns the counter ctx carries, or nil.
func attemptsOf(ctx context.Context) *Attempts {
	a, _ := ctx.Value(attemptsKey{}).(*Attempts)
	return a
}
