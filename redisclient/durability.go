package redisclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/lockswap/lockswap"
)

// Durability is what a Redis server says (CONFIG GET) about the settings
// that decide whether a key it keeps can go back to an older value or
// vanish: a Redlock fence counter or restart-safety epoch (docs/redlock.md,
// assumptions A3 and A4), a lock a restart must not forget.
type Durability struct {
	// AppendOnly is appendonly: the append-only file is on.
	AppendOnly bool
	// AppendFsync is appendfsync: "always", "everysec" or "no".
	AppendFsync string
	// Save is the save rule of RDB snapshots ("3600 1 300 100 60 10000"),
	// "" when snapshots are off.
	Save string
	// MaxmemoryPolicy is maxmemory-policy ("noeviction", "allkeys-lru",
	// ...).
	MaxmemoryPolicy string
	// Maxmemory is maxmemory in bytes, "0" for no limit (nothing is
	// evicted whatever the policy).
	Maxmemory string
	// NoFsyncOnRewrite is no-appendfsync-on-rewrite: while a rewrite or
	// snapshot runs, writes are not fsynced, even under appendfsync
	// always.
	NoFsyncOnRewrite bool
}

// durabilityParams are the parameters ReadDurability reads, one CONFIG
// GET each (several in one needs Redis 7).
var durabilityParams = []string{"appendonly", "appendfsync", "save", "maxmemory-policy", "maxmemory", "no-appendfsync-on-rewrite"}

// ReadDurability reads c's [Durability] with CONFIG GET, which the
// client's user must be allowed (+config|get). A server that denies it
// (NOPERM, a managed Redis that renames CONFIG) gives an error matching
// [ErrReply].
func ReadDurability(ctx context.Context, c Client) (Durability, error) {
	got := make(map[string]string, len(durabilityParams))
	for _, p := range durabilityParams {
		v, err := c.Do(ctx, "CONFIG", "GET", p)
		if err != nil {
			return Durability{}, fmt.Errorf("%v: CONFIG GET %s: %w", c, p, err)
		}
		pairs, _ := v.([]any)
		if len(pairs) != 2 {
			return Durability{}, fmt.Errorf("%v: CONFIG GET %s: unexpected reply %v", c, p, v)
		}
		s, _ := pairs[1].(string)
		got[p] = s
	}
	return Durability{
		AppendOnly:       got["appendonly"] == "yes",
		AppendFsync:      got["appendfsync"],
		Save:             strings.TrimSpace(got["save"]),
		MaxmemoryPolicy:  got["maxmemory-policy"],
		Maxmemory:        got["maxmemory"],
		NoFsyncOnRewrite: got["no-appendfsync-on-rewrite"] == "yes",
	}, nil
}

// Risks returns, in a user's words, each setting under which a crash or
// memory pressure can give back an older value of a key or drop it
// between restarts, with what to set instead; none for a server with
// persistence off (a restart comes back empty, which the backends
// notice) or with appendonly yes and appendfsync always, and no eviction
// of keys without a TTL.
func (d Durability) Risks() []string {
	var r []string
	switch {
	case d.AppendOnly && d.AppendFsync != "always":
		r = append(r, fmt.Sprintf("appendfsync %s: a crash loses the last writes, so a counter can come back older (set appendfsync always, or turn persistence off)", d.AppendFsync))
	case d.AppendOnly && d.NoFsyncOnRewrite:
		r = append(r, "no-appendfsync-on-rewrite yes: while a rewrite or snapshot runs, writes are not fsynced, so a crash then brings a counter back older (set no-appendfsync-on-rewrite no)")
	case !d.AppendOnly && d.Save != "":
		r = append(r, fmt.Sprintf("RDB snapshots (save %q) without the append-only file: a crash restores an older snapshot, so a counter can come back older (set appendonly yes with appendfsync always, or save \"\" for no persistence)", d.Save))
	}
	if strings.HasPrefix(d.MaxmemoryPolicy, "allkeys-") && d.Maxmemory != "0" {
		r = append(r, fmt.Sprintf("maxmemory-policy %s with maxmemory %s: memory pressure can evict a key that has no TTL, such as a restart-safety epoch, and fence counters under any policy (set noeviction; a volatile-* policy keeps the epoch but can evict locks and counters; an evicted counter is seeded again from the clock, docs/redlock-fencing.md A3)", d.MaxmemoryPolicy, d.Maxmemory))
	}
	return r
}

// DurabilityCheck is one server's answer to [CheckDurability].
type DurabilityCheck struct {
	// Client reaches the server.
	Client Client
	// Risks are its settings' [Durability.Risks]; none when Err is set.
	Risks []string
	// Err is why its settings could not be read: the ACL denies CONFIG
	// GET, a managed service renamed it, or the server did not answer
	// within ctx.
	Err error
}

// CheckDurability reads the [Durability] of clients' servers at once,
// bounded by ctx, and returns one DurabilityCheck per client, in order.
func CheckDurability(ctx context.Context, clients []Client) []DurabilityCheck {
	out := make([]DurabilityCheck, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := ReadDurability(ctx, c)
			out[i] = DurabilityCheck{Client: c, Err: err}
			if err == nil {
				out[i].Risks = d.Risks()
			}
		}()
	}
	wg.Wait()
	return out
}

// RequireDurable returns nil when no server in checks has risks, and
// otherwise an error matching lockswap.ErrInvalid that names each such
// server and its risks (what to set instead): the answer of require=durable.
// Servers whose settings could not be read do not fail it.
func RequireDurable(checks []DurabilityCheck) error {
	var bad []string
	for _, c := range checks {
		if len(c.Risks) > 0 {
			bad = append(bad, fmt.Sprintf("%v: %s", c.Client, strings.Join(c.Risks, "; ")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("require=durable: %s: %w", strings.Join(bad, "; "), lockswap.ErrInvalid)
}

// WarnDurability checks clients' servers ([CheckDurability], bounded by
// ctx) and writes, at level Warn, riskMsg for each server whose settings
// have [Durability.Risks] (attributes instance, risks, reason) and
// unknownMsg once for the servers whose settings could not be read
// (attributes instances, errors, reason). It writes nothing when ctx was
// cancelled (the Locker closed). The backends with fences or restart
// safety call it once, at New, on their background group, with their
// Logger.
func WarnDurability(ctx context.Context, log *slog.Logger, clients []Client, riskMsg, unknownMsg string) {
	checks := CheckDurability(ctx, clients)
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return
	}
	var unknown, causes []string
	for _, c := range checks {
		addr := c.Client.String()
		if c.Err != nil {
			unknown = append(unknown, addr)
			causes = append(causes, c.Err.Error())
			continue
		}
		if len(c.Risks) > 0 {
			log.LogAttrs(ctx, slog.LevelWarn, riskMsg,
				slog.String("instance", addr),
				slog.String("risks", strings.Join(c.Risks, "; ")),
				slog.String("reason", durabilityRiskReason))
		}
	}
	if len(unknown) > 0 {
		log.LogAttrs(ctx, slog.LevelWarn, unknownMsg,
			slog.Any("instances", unknown),
			slog.String("errors", strings.Join(causes, "; ")),
			slog.String("reason", durabilityUnknownReason))
	}
}

// durabilityRiskReason is the reason attribute of WarnDurability's riskMsg.
const durabilityRiskReason = "fence counters and restart-safety epochs need each server to keep them: persistence off, or appendonly yes with appendfsync always, and no eviction of keys without a TTL"

// durabilityUnknownReason is the reason attribute of its unknownMsg.
const durabilityUnknownReason = "the persistence and eviction settings of these servers could not be read (CONFIG GET): check them by hand, or allow +config|get to the Locker's user"
