package rueidis

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient/internal/adapt"
	"github.com/lockswap/lockswap/redisclient/internal/workers"
)

// group is the adapter's group commit: while one of its commands (or
// batch) is in flight, the commands other callers send wait, and go
// together as one DoMulti (one write, one read of the replies) when it
// returns. A command sent while nothing is in flight goes at once, under
// its caller's context, so a caller alone pays nothing for it.
//
// rueidis pipelines by itself, but its writer sends whatever is queued as
// soon as it runs, which on a busy machine is after nearly every command:
// many small writes, each a system call on both ends. Holding the next
// batch until the previous one is answered makes batches as large as the
// callers that arrived meanwhile. With Redlock (one command per instance
// per caller, the instances sharing the machine's CPUs with the client)
// this takes 1.5–1.6 times the acquisitions per second at 32 goroutines
// (docs/benchmarks.md, "Group commit for Redlock on rueidis").
//
// Each caller still returns by its own context: a waiting caller whose
// context ends returns at once, and its command is not sent if its batch
// has not gone yet (its outcome is unknown if it has). A batch goes under
// a context of its own that ends at the latest deadline of its commands,
// on a worker goroutine (package workers) that serves it until the
// batch's replies come or that deadline passes, so no caller's end cuts
// short another caller's command.
// That context carries no caller's values: a rueidis hook (tracing, for
// one) sees the batch as one DoMulti outside any caller's trace.
//
// The grouped adapter's split conns ([splitter], split.go) use the same
// batches without a caller waiting in do: start adds a command to the
// batch in the making, or, when nothing is in flight, sends it at once
// from a worker goroutine (sendAlone), and the caller waits for the
// replies afterwards.
//
// A blocking command (BLPOP and the like) goes alone, as it would hold up
// the batch. Only [adapter.Grouped] adapters group, and a cluster client's
// adapter never does (a batch would wait for its slowest node). redlock
// asks for them ([redisclient.Grouper]); singleredis does not: with one
// server, rueidis's own pipelining does better there (the hand-off from
// the batch's goroutine to each caller costs more than the batching
// saves: 18.0–18.7 against 15.4–15.5 µs per cycle at 32 goroutines).
type group struct {
	mu      sync.Mutex
	busy    bool      // a command or batch is in flight
	pending []*member // commands waiting for the next batch, in arrival order
	// spare is the array of the batch before the one in flight, given
	// back empty for the next pending list: one batch is in flight at a
	// time, so two arrays serve them all. Only the adapter reads these
	// arrays; the commands a batch hands to rueidis go in a slice of
	// their own (sendBatch).
	spare []*member
}

// member is one caller's command in a batch.
type member struct {
	ctx  context.Context
	cmd  rueidis.Completed
	done chan rueidis.RedisResult // buffered: the batch never blocks on a caller that left
	late bool                     // a split conn's command flushed after its context ended (split.go)
	fb   scriptFallback           // a split conn's EVALSHA: its EVAL, sent on NOSCRIPT (split.go)
}

var members = sync.Pool{New: func() any { return &member{done: make(chan rueidis.RedisResult, 1)} }}

// put gives m, whose reply has been taken, back to the pool, cleared. A
// member whose caller gave up is never put back: its batch may still
// answer into it.
func (m *member) put() {
	done := m.done
	*m = member{done: done}
	members.Put(m)
}

// do sends cmd: at once when nothing else of the adapter's is in flight,
// otherwise with the next batch.
func (a *adapter) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	ctx, cancel := adapt.WithDone(ctx)
	defer cancel()
	if !a.grouped || cmd.IsBlock() {
		if a.unwatched(ctx) {
			return a.doWatched(ctx, cmd, nil)
		}
		return a.send(ctx, cmd)
	}
	g := &a.group
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		if a.unwatched(ctx) {
			return a.doWatched(ctx, cmd, a.sendPending)
		}
		// Deferred: the commands that gathered are sent even if Do
		// panics.
		defer a.sendPending()
		return a.send(ctx, cmd)
	}
	if err := endErr(ctx); err != nil {
		g.mu.Unlock()
		return rueidis.NewErrorResult(err)
	}
	m := members.Get().(*member)
	m.ctx, m.cmd = ctx, cmd
	g.pending = append(g.pending, m)
	g.mu.Unlock()
	select {
	case r := <-m.done:
		m.put()
		return r
	case <-ctx.Done():
		// The batch still answers into m.done (buffered); m is not
		// reused.
		return rueidis.NewErrorResult(ctx.Err())
	}
}

// unwatched reports whether rueidis may not watch ctx's cancellation
// for a command of a: ctx can be cancelled, and either has no deadline
// or a's client may run a command synchronously.
//
// A client made without ClientOption.AlwaysPipelining runs a command
// that is alone on its connection by itself, with the context's deadline
// on the socket and no eye on its cancellation: the kit's request for a
// caller whose context has no deadline carries a deadline of
// lockswap.CleanupTimeout or RequestTimeout, and a cancellation would wait
// for it (the caller's Release took 2 s instead of about DeadlineGrace).
// Only a client Dial or NewClient made is known to pipeline always;
// there, a context with a deadline is left to rueidis, which watches its
// cancellation on a connection that is up, and the dialer watches the
// handshake of a connection that comes up under a command
// (watchHandshake). While a connection of the client comes up, though,
// rueidis has the other commands bound for it wait for that handshake
// without looking at their own contexts: those go through doWatched
// (a.rising). Watching every command from another goroutine would cost
// each lock cycle two hand-overs and two channels.
func (a *adapter) unwatched(ctx context.Context) bool {
	if ctx.Done() == nil {
		return false
	}
	_, ok := ctx.Deadline()
	return !ok || !a.pipelined || a.rising.Load() > 0
}

// doWatched sends cmd under ctx, which can be cancelled and which rueidis
// may not watch (unwatched), from a worker goroutine (package workers),
// and returns its reply, or the context's error as soon as ctx is
// cancelled: the command then finishes in the background (its outcome
// unknown), and after runs when it has. A hand-over to a worker per such
// command; a context that cannot be cancelled, or one with a deadline on
// a client Dial made, goes without.
func (a *adapter) doWatched(ctx context.Context, cmd rueidis.Completed, after func()) rueidis.RedisResult {
	done := make(chan rueidis.RedisResult, 1)
	workers.Run(func() {
		if after != nil {
			defer after()
		}
		done <- a.send(ctx, cmd)
	})
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	}
}

// send sends cmd under ctx, unless ctx has ended (endErr): a command
// whose caller's deadline has passed is not sent even when the context's
// timer has not run yet, as a batch does not send it (sendBatch). rueidis
// would write it and wait for ctx.Done, and the server would run the
// command of a caller that is leaving (a SET NX would take a lock its
// caller is not told of).
func (a *adapter) send(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if err := endErr(ctx); err != nil {
		return rueidis.NewErrorResult(err)
	}
	ctx, cancel := adapt.WithDone(ctx)
	defer cancel()
	return a.c.Do(ctx, cmd)
}

// sendPending is called by the caller whose command was in flight, when
// it returns: a worker goroutine sends the commands that gathered meanwhile,
// batch after batch, and then nothing is in flight.
func (a *adapter) sendPending() {
	if batch := a.nextBatch(); batch != nil {
		workers.Run(func() { a.sendBatches(batch) })
	}
}

// nextBatch returns the commands waiting to go, or nil, marking nothing
// in flight, when none are.
func (a *adapter) nextBatch() []*member {
	g := &a.group
	g.mu.Lock()
	defer g.mu.Unlock()
	batch := g.pending
	if len(batch) == 0 {
		g.busy = false
		return nil
	}
	g.pending, g.spare = g.spare[:0], nil
	return batch
}

// sendBatches sends batch, then the batches that gather meanwhile, until
// none are waiting.
func (a *adapter) sendBatches(batch []*member) {
	for ; batch != nil; batch = a.nextBatch() {
		a.sendBatch(batch)
		clear(batch)
		a.group.mu.Lock()
		a.group.spare = batch[:0]
		a.group.mu.Unlock()
	}
}

// sendBatch sends the commands of batch whose callers still wait, as one
// DoMulti, under a context that ends at their latest deadline, and gives
// each caller its reply.
//
// The commands go in a slice made for this batch and never reused: a
// DoMulti that returns because its context ended leaves the slice in
// rueidis's queue, where its writer reads it when it gets to it (after a
// stalled write, say) and its reader as the replies come. Clearing or
// refilling it for the next batch crashed the writer (a nil command) or
// sent the next batch's commands twice. One allocation per batch of two
// or more commands, shared by its callers.
func (a *adapter) sendBatch(batch []*member) {
	sent := batch[:0]
	var latest time.Time
	unbounded := false
	for _, m := range batch {
		d, bounded := m.ctx.Deadline()
		if err := endErr(m.ctx); err != nil {
			// Its caller left, or is leaving (its deadline passed,
			// though its context's timer may not have run yet), before
			// the batch went: not sent.
			m.done <- rueidis.NewErrorResult(err)
			continue
		}
		if !bounded {
			unbounded = true
		} else if d.After(latest) {
			latest = d
		}
		sent = append(sent, m)
	}
	if len(sent) == 0 {
		return
	}
	ctx := context.Background()
	if !unbounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	if len(sent) == 1 {
		// Do takes the command by value: nothing to keep.
		sent[0].done <- a.evalOnNoScript(ctx, sent[0], a.c.Do(ctx, sent[0].cmd))
		return
	}
	cmds := make([]rueidis.Completed, len(sent))
	for i, m := range sent {
		cmds[i] = m.cmd
	}
	for i, r := range a.c.DoMulti(ctx, cmds...) {
		sent[i].done <- a.evalOnNoScript(ctx, sent[i], r)
	}
}
