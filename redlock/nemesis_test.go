package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesistest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redlock"
)

// TestHistoryUnderNemesis runs three fenced, restart-safe Redlock clients
// over three masters through the recorded-increment workload (package
// history) while a seeded nemesis (internal/nemesistest) injects one fault
// at a time: a master paused (SIGSTOP), restarted without its data, slowed
// or cut off by its proxy; and one section in ten pauses its holder until
// its lock has ended and up to half a TTL more. Within Redlock's assumptions (one master at a time)
// the history must be linearizable and the fences must rise and never
// repeat: a holder that paused past its lock is stopped by its fence.
// -nemesis.seed replays a schedule, -nemesis.for runs longer (default 3 s);
// a failure writes the history and Porcupine's view to a temporary folder.
func TestHistoryUnderNemesis(t *testing.T) {
	addrs, srvs := realN(t, 3)
	raws := rawClients(t, addrs)
	seedOldEpoch(t, raws)
	proxies := make([]*testserver.Proxy, len(addrs))
	via := make([]string, len(addrs))
	for i, a := range addrs {
		proxies[i] = testserver.ProxyT(t, a)
		via[i] = proxies[i].Addr()
	}
	const ttl = time.Second
	var lks []lockswap.Locker
	for range 3 {
		lks = append(lks, newLocker(t, via, redistest.GoRedis, redlock.Options{Fence: true, RestartSafety: true,
			MaxTTL: 2 * time.Second, TTL: ttl, InstanceTimeout: adaptiveTimeout, MasterNames: []string{"a", "b", "c"}}))
	}
	var faults []nemesistest.Fault
	for i := range srvs {
		faults = append(faults, nemesistest.RedisFaults(fmt.Sprintf("master %d", i), srvs[i], proxies[i])...)
	}
	seed := nemesistest.Seed()
	r := nemesistest.Rand(seed)
	ctx, cancel := context.WithTimeout(ctxT(t), nemesistest.Duration(3*time.Second))
	defer cancel()
	ops := nemesistest.RunWorkload(ctx, t,
		nemesistest.Schedule{Faults: faults, MaxHold: 500 * time.Millisecond, MaxGap: 300 * time.Millisecond, Seed: seed},
		history.Workload{Lockers: lks, Keys: []string{"a", "b"}, Sections: 1 << 30, TTL: ttl,
			Register: history.NewRegister(true), Recorder: history.NewRecorder(),
			Between: nemesistest.PauseHolder(r, 10, 500*time.Millisecond)})
	nemesistest.CheckHistory(t, seed, ops, 3, true)
}
