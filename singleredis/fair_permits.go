package singleredis

import (
	_ "embed"

	"github.com/lockswap/lockswap/redisclient"
)

// The fair wait of permits (Options.FairWait with lockswap.WithPermits):
// the queue and registrations are the mutex's keys (FairQueueKey,
// FairWaitersKey), with registrations of their own shape, so that a
// queue serves one kind (see permit_fair_common.lua). A release frees its
// slot and hands the free slots to the first live waiters in the same
// request; a waiter that finds a free slot takes it only when nobody
// alive waits before it.
var (
	//go:embed permit_fair_common.lua
	permitFairCommonLua string
	//go:embed permit_fair_wait.lua
	permitFairWaitLua string
	//go:embed permit_fair_release.lua
	permitFairReleaseLua string
	//go:embed permit_fair_leave.lua
	permitFairLeaveLua string

	// permitFairWait takes a permit or registers (renews) the waiter; see
	// permit_fair_wait.lua for its replies, which have fair_wait.lua's
	// shape with the slot fifth.
	permitFairWait = redisclient.NewScript(permitScript(permitFairCommonLua + permitFairWaitLua))
	// permitFairRelease frees a permit's slot and hands the free slots to
	// the first live waiters, waking them, in one request.
	permitFairRelease = redisclient.NewScript(permitScript(permitFairCommonLua + permitFairReleaseLua))
	// permitFairLeave takes a waiter that gives up out of the queue, and
	// says whether it had been handed a permit.
	permitFairLeave = redisclient.NewScript(permitScript(permitFairCommonLua + permitFairLeaveLua))
)
