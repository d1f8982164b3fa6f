package redisclient

import (
	"context"
	"log/slog"
	"strings"
)

// MsgClientCost is the message of the record singleredis, redlock and
// legacysetnx write to their Options.Logger, at level Info, once at New,
// when some of their clients were built in a way that makes every lock
// command cost more than it would on the same client built the
// recommended way (a goroutine of the adapter's per command, on go-redis
// with a context and a timer too, which keep the call's deadline and
// cancellation where the client would not). Its
// attributes are "servers" (the clients, as Client.String gives them: no
// credentials) and "reason" (what costs more, and the setting that
// removes it).
const MsgClientCost = "client built without the setting that makes locks cheap"

// CostNoter is implemented by adapters that can tell their client was
// built in a way that makes each command cost more (see MsgClientCost).
type CostNoter interface {
	// CostNote says what costs more and which setting removes it; "" when
	// the client is built the recommended way.
	CostNote() string
}

// LogClientCost writes MsgClientCost to l once for each distinct note of
// clients that implement CostNoter, naming those clients; a nil l writes
// nothing. The backends call it at New.
func LogClientCost(l *slog.Logger, clients ...Client) {
	if l == nil {
		return
	}
	var notes []string
	servers := map[string][]string{}
	for _, c := range clients {
		cn, ok := c.(CostNoter)
		if !ok {
			continue
		}
		n := cn.CostNote()
		if n == "" {
			continue
		}
		if _, seen := servers[n]; !seen {
			notes = append(notes, n)
		}
		servers[n] = append(servers[n], c.String())
	}
	for _, n := range notes {
		l.LogAttrs(context.Background(), slog.LevelInfo, MsgClientCost,
			slog.String("servers", strings.Join(servers[n], ", ")),
			slog.String("reason", n))
	}
}
