// Package workers runs the Redis adapters' commands that must let their
// caller return before they finish on goroutines it keeps, rather than on
// a goroutine started per command.
//
// A command that must let its caller return when its context ends (the
// go-redis adapter's calls and bounded commands; the rueidis adapter's
// commands that it watches itself, its group commit's batches, and a
// split conn's command sent alone or blocking) runs on a goroutine other
// than the caller's. Starting a goroutine per command costs more than the
// goroutine: its stack starts small and is grown (copied) to the client's
// depth on every command, which a CPU profile of 32 goroutines cycling
// locks on go-redis put at 12–13% of the time. The package keeps those
// goroutines instead, as workers whose stacks have already grown, shared
// by every adapter of the process:
//
//   - a command goes to a worker waiting for one, if there is one, and
//     otherwise starts a new worker, so a command never waits for a worker
//     and there are never more workers than the commands in flight plus
//     the workers between finishing a command and waiting for the next
//     (a command that arrives then starts a worker of its own);
//   - a worker exits between Idle and twice that long after its last
//     command, so the workers of a burst end soon after it, and a process
//     that stops using the adapters keeps none.
//
// An abandoned command keeps its worker until it returns, as it kept its
// goroutine before (on the client's own timeouts).
//
// A worker serves the commands of many callers, so it runs them without
// profiler labels (runtime/pprof): a goroutine inherits the labels of the
// one that starts it, and without this every later command of a worker
// would show in a CPU profile under the labels of the caller that
// happened to start it.
package workers

import (
	"context"
	"runtime/pprof"
	"time"
)

// Idle is how long a worker waits for a command before it checks whether
// it served one since its last check, and exits if not: a worker exits
// between Idle and twice Idle after its last command.
const Idle = 100 * time.Millisecond

// work hands a command to a worker. It is unbuffered: a send that does not
// block reaches a worker that waits for it, and a command is never queued.
var work = make(chan func())

// Run runs f on a waiting worker, or on a new one when none waits. It
// does not wait for f.
func Run(f func()) {
	select {
	case work <- f:
	default:
		go worker(f)
	}
}

// worker runs f, then the commands handed to it, until it has served none
// for a whole Idle. (The timer is reset once per Idle, not per command:
// served says whether the period that ends had one.)
func worker(f func()) {
	pprof.SetGoroutineLabels(context.Background()) // none: see the package doc
	f()
	idle := time.NewTimer(Idle)
	defer idle.Stop()
	served := true // f
	for {
		select {
		case f = <-work:
			f()
			served = true
		case <-idle.C:
			if !served {
				return
			}
			served = false
			idle.Reset(Idle)
		}
	}
}
