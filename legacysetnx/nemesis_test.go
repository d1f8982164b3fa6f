package legacysetnx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesistest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/legacysetnx"
)

// TestHistoryClockJump shows the declared weakness of the legacy pattern
// (Guarantees().Clock is ClockSynchronized) as a history Porcupine
// rejects, forced rather than waited for: while client 0 holds the lock
// between its read and its write, client 1's wall clock jumps two TTLs
// ahead. Client 1 then sees client 0's timestamp as expired, takes the
// lock over (GETSET) and increments, and client 0's write loses that
// update. With ServerTime the timestamps come from the server's clock, so
// the jump changes nothing: client 1's attempt finds the lock held, and
// the history is linearizable.
func TestHistoryClockJump(t *testing.T) {
	const ttl = 10 * time.Second
	for _, serverTime := range []bool{false, true} {
		t.Run(map[bool]string{false: "client-clock", true: "server-time"}[serverTime], func(t *testing.T) {
			srv := testserver.RedisT(t, testserver.RedisOptions{})
			var jumped fakeClock // client 1's clock
			lks := [2]lockswap.Locker{
				newLocker(t, redistest.GoRedis, srv.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, ServerTime: serverTime}),
				newLocker(t, redistest.GoRedis, srv.Addr(), legacysetnx.Options{Unit: legacysetnx.Milliseconds, ServerTime: serverTime, Clock: jumped.Now}),
			}
			ctx := ctxT(t)
			rec, reg := history.NewRecorder(), history.NewRegister(false)
			section := func(client int, between func(context.Context)) history.Op {
				t.Helper()
				l, err := lks[client].TryAcquire(ctx, "k", lockswap.WithTTL(ttl))
				if err != nil {
					t.Fatalf("client %d: %v", client, err)
				}
				defer l.Release(ctx)
				return history.Section(ctx, rec, reg, client, l, between)
			}
			section(1, nil) // the register holds a value
			var tookOver bool
			section(0, func(context.Context) {
				jumped.Advance(2 * ttl)
				l, err := lks[1].TryAcquire(ctx, "k", lockswap.WithTTL(ttl))
				switch {
				case err == nil:
					tookOver = true
					history.Section(ctx, rec, reg, 1, l, nil)
					l.Release(ctx)
				case !errors.Is(err, lockswap.ErrHeld):
					t.Fatalf("client 1 after its clock jumped: %v, want the lock or ErrHeld", err)
				}
			})
			if tookOver == serverTime {
				t.Fatalf("client 1 took the lock over after its clock jumped: %v, want %v (server time %v)", tookOver, !serverTime, serverTime)
			}
			res := nemesistest.CheckHistory(t, 0, rec.Ops(), 2, serverTime)
			if !serverTime && (res.Linearizable || len(res.Violations) != 1) {
				t.Errorf("with the clients' clocks the history is linearizable %v (violations %q): the lost update went unseen", res.Linearizable, res.Violations)
			}
			if g := legacysetnx.Guarantees(); g.Clock != lockswap.ClockSynchronized {
				t.Errorf("Guarantees().Clock = %v; the weakness shown here must be declared", g.Clock)
			}
		})
	}
}
