package etcdlease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/internal/nemesistest"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestHistoryUnderNemesis runs three etcdlease clients, each with its own
// etcd client, through the recorded-increment workload (package history)
// while a seeded nemesis (internal/nemesistest) pauses the etcd process
// (SIGSTOP: the server's lease timers stop with it and may expire holders'
// leases when it continues), slows its replies by 20 ms or cuts its
// clients off, and one section in ten pauses its holder until its lock
// has ended and up to half a TTL more. The fences (create revisions) must
// rise and never repeat and the fenced register's history must be
// linearizable. It runs the etcd program on PATH, as a process that can be
// paused. -nemesis.seed replays a schedule, -nemesis.for runs longer
// (default 3 s).
func TestHistoryUnderNemesis(t *testing.T) {
	srv := testserver.EtcdBinaryT(t)
	proxy := testserver.ProxyT(t, strings.TrimPrefix(srv.Endpoints()[0], "http://"))
	const ttl = 2 * time.Second
	var lks []lockswap.Locker
	for range 3 {
		lks = append(lks, openT(t, []string{"http://" + proxy.Addr()}, "nemesis/"))
	}
	seed := nemesistest.Seed()
	ctx, cancel := context.WithTimeout(context.Background(), nemesistest.Duration(3*time.Second))
	defer cancel()
	ops := nemesistest.RunWorkload(ctx, t,
		nemesistest.Schedule{Faults: nemesistest.EtcdFaults("etcd", srv, proxy), MaxHold: time.Second, MaxGap: 300 * time.Millisecond, Seed: seed},
		history.Workload{Lockers: lks, Keys: []string{"a", "b"}, Sections: 1 << 30, TTL: ttl,
			Register: history.NewRegister(true), Recorder: history.NewRecorder(),
			Between: nemesistest.PauseHolder(nemesistest.Rand(seed), 10, ttl/2)})
	nemesistest.CheckHistory(t, seed, ops, 3, true)
}
