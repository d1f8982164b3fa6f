package redlock

import (
	"context"
	"fmt"

	"github.com/lockswap/lockswap"
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

// CheckDurability implements registry.DurabilityChecker (require=durable):
// it reads every master's settings at once, bounded by ctx, and returns an
// error matching lockswap.ErrInvalid that names each master whose
// settings let a crash bring a fence counter or the epoch back older or
// let memory pressure evict it, and what to set instead; nil when none
// does. Masters whose settings cannot be read (CONFIG GET denied, no
// answer) do not fail it. A Locker without Fence or RestartSafety keeps
// nothing the check is about: ErrInvalid.
func (lk *Locker) CheckDurability(ctx context.Context) error {
	p := lk.p
	if !p.opts.Fence && !p.opts.RestartSafety {
		return fmt.Errorf("redlock: require=durable applies to fence=true or restart_safety=true, and this Locker has neither: %w", lockswap.ErrInvalid)
	}
	clients := make([]redisclient.Client, len(p.inst))
	for i := range p.inst {
		clients[i] = p.inst[i].c
	}
	if err := redisclient.RequireDurable(redisclient.CheckDurability(ctx, clients)); err != nil {
		return fmt.Errorf("redlock: %w", err)
	}
	return nil
}
