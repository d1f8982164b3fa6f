package redlock

import (
	"context"

	"github.com/lockswap/lockswap/redisclient"
)

// checkDurability reads, on every master at once, the settings that
// decide whether a fence counter or a restart-safety epoch can come back
// older or vanish (redisclient.Durability: assumptions A3 and A4 of
// docs/redlock-fencing.md), and writes MsgDurabilityRisk for each master
// whose settings can, and MsgDurabilityUnknown once for those whose
// settings could not be read (a master down at New does not fail it). It
// runs once, on the Locker's background group, when New made a Locker
// with Fence or RestartSafety and a Logger: bounded by the group's
// lockswap.CleanupTimeout, it ends at Close and then writes nothing.
func (p *proto) checkDurability(ctx context.Context) {
	clients := make([]redisclient.Client, len(p.inst))
	for i := range p.inst {
		clients[i] = p.inst[i].c
	}
	redisclient.WarnDurability(ctx, p.log, clients, MsgDurabilityRisk, MsgDurabilityUnknown)
}
