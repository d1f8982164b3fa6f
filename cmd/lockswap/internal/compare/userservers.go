package compare

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/userservers"
)

// This file holds what compare does differently on servers it did not
// start (--redis, --etcd): it checks that they answer before anything runs,
// it does not run what would harm them, and it deletes every key it wrote.

// errWouldHarm: the scenario injects a fault (kill, restart, failover)
// that would harm servers the comparison did not start.
var errWouldHarm = fmt.Errorf("%w: it would harm them (it kills, restarts, fails over, stops or hangs servers)", errUserServers)

// checkUserServers makes sure every server given with --redis and --etcd
// answers before any scenario runs (userservers.Servers.Check).
func checkUserServers(ctx context.Context, e *env) error {
	return e.userTargets().Check(ctx, "compare")
}

// userTargets returns the user's servers of e.
func (e *env) userTargets() userservers.Servers {
	return userservers.Servers{Redis: e.redisAddrs, Auth: e.redisAuth, Etcd: e.etcdEndpoints}
}

// userServers is what a column runs on when the user gave their own
// servers (--redis for the Redis backends, --etcd for etcdlease); else
// the servers compare starts, as the column says.
func userServers(c Column, o Options) string {
	switch {
	case c.Backend == "etcdlease" && len(o.EtcdEndpoints) > 0:
		return "your --etcd endpoints"
	case c.Backend == "etcdlease" || len(o.RedisAddrs) == 0:
		return c.Servers
	case c.kit.serverWideKey != "":
		return "not run on your --redis servers: it keeps a server-wide key"
	}
	return "your --redis servers"
}

// MsgKeysLeft is compare's warning that it could not delete its keys from
// the user's servers (attributes "pattern", the keys to delete, and
// "error").
const MsgKeysLeft = "compare could not delete its keys from your servers: delete the keys matching pattern"

// cleanUserServers deletes compare's keys from the user's servers and
// warns, through Options.Log, when it could not: a key left behind is the
// user's to delete, so they must hear of it.
func cleanUserServers(e *env) {
	err := e.userTargets().RemoveKeys(e.prefix)
	if err != nil && e.warn != nil {
		slog.New(e.warn).Warn(MsgKeysLeft, "pattern", userservers.KeysPattern(e.prefix), "error", err)
	}
}
