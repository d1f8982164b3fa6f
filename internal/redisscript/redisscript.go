// Package redisscript holds the Lua scripts that more than one Redis
// backend runs, each once, as a .lua file next to this one: the standard
// single-instance lock's release (compare-and-delete), extend
// (compare-and-pexpire) and hand-over. singleredis and redlock use all
// three, legacysetnx the release; both fenced backends start their fenced
// scripts with FenceCounterLua, the checks of a fence counter. A script
// that only one backend runs lives in that backend's folder.
//
// Every script takes its keys and values through KEYS and ARGV. The files
// hold the exact bytes of the scripts (the single-line ones end without a
// newline), so that their SHA1 stays what it was when they were Go string
// literals.
package redisscript

import (
	_ "embed"
	"fmt"

	"github.com/lockswap/lockswap/redisclient"
)

var (
	//go:embed compare_and_delete.lua
	compareAndDeleteLua string
	//go:embed compare_and_pexpire.lua
	compareAndPExpireLua string
	//go:embed hand_over.lua
	handOverLua string
)

// FenceCounterLua is the start of every script that reads a fence counter
// (singleredis's fenced scripts, redlock's fenced acquire and write-back):
// it switches a Redis older than 5 to effects replication, which every
// Redis since 5 uses by default (the only mode since 7), so that writes
// may follow TIME (replicas and the AOF receive the counter's new value,
// not the script to run again), and defines four Lua functions:
//
//   - fence_read(k) returns the counter under k as a number, nil when k
//     does not exist, or, writing nothing, a negative code when it cannot
//     give a fence: FenceNotInteger (a string that is not a non-negative
//     integer), FenceTooLarge (so high that one more would reach 2^53:
//     FenceLimit) or FenceWrongType (another Redis type: the GET is a
//     redis.pcall, whose WRONGTYPE error reply the function turns into the
//     code, so that no error is raised halfway through a script).
//   - fence_clock() returns the server's clock (TIME) in microseconds since
//     the Unix epoch: singleredis's lowest next fence, and what
//     fence_seed leads.
//   - fence_seed(now) returns redlock's seed of a missing counter for the
//     server's clock now: now + FenceGuessAhead, at or above every fence a
//     guess may install at that clock reading, so that a counter lost at
//     any time is seeded again above every fence issued before (as long
//     as the masters' clocks agree within the time since that fence).
//   - fence_guess(c, g, now) reports whether a guessed fence g may be
//     installed over the counter value c (redlock's one-round fast path):
//     g is above c and below FenceLimit, and either exactly c+1 or at most
//     FenceGuessAhead above the server's clock (now, when the script has
//     read it already, else read then). The bound keeps every fence at or
//     below the seed a lost counter gets (fence_seed), whatever the
//     client's clock says.
//
// A script is FenceCounterLua followed by its own body; each keeps its keys
// and values in KEYS and ARGV.
//
//go:embed fence_counter.lua
var FenceCounterLua string

// FenceGuessAhead is how far above the server's clock fence_guess
// (FenceCounterLua) lets a guessed fence be, and how far above it
// fence_seed seeds a missing counter, in microseconds: 20 ms. The script
// holds the same number.
const FenceGuessAhead = 20000

// FenceLimit bounds the fences: every fence is below 2^53, so that Lua's
// numbers, float64 and JSON carry it exactly.
const FenceLimit = 1 << 53

// The codes fence_read (FenceCounterLua) returns for a counter that cannot
// give a fence; the scripts that use it answer them as they are.
const (
	FenceNotInteger = -1 // the counter holds a string that is not a non-negative integer
	FenceTooLarge   = -2 // the counter is so high that the next fence would reach 2^53
	FenceWrongType  = -3 // the counter holds another Redis type
)

// FenceCounterProblem says what is wrong with a counter for which a fenced
// script answered code (FenceNotInteger, FenceTooLarge or FenceWrongType),
// as a phrase that follows the counter's name ("does not hold a
// non-negative integer").
func FenceCounterProblem(code int64) string {
	switch code {
	case FenceNotInteger:
		return "does not hold a non-negative integer"
	case FenceTooLarge:
		return "is too high: the next fence would not be below 2^53 (9007199254740992)"
	case FenceWrongType:
		return "holds another Redis type, not a counter"
	}
	return fmt.Sprintf("gave the unexpected reply %d", code)
}

// CompareAndDelete is the release script of the Redis locks: it deletes
// KEYS[1] only if it still holds ARGV[1] (the holder's token or timestamp),
// and returns 1 if it did, 0 otherwise.
var CompareAndDelete = redisclient.NewScript(compareAndDeleteLua)

// CompareAndPExpire is the extend script of the token locks: it sets the
// TTL of KEYS[1] to ARGV[2] milliseconds only if the key still holds
// ARGV[1] (the holder's token), and returns 1 if it did, 0 otherwise.
var CompareAndPExpire = redisclient.NewScript(compareAndPExpireLua)

// HandOver releases a lock and takes it for the next holder in one request:
// exactly CompareAndDelete of KEYS[1] with ARGV[1] (our token), then
// SET KEYS[1] ARGV[2] NX PX ARGV[3] (the next holder's token and TTL in
// ms), run atomically. It returns {released, set}, each 1 or 0. A Locker
// uses it when one of its own callers waits for the key it releases.
var HandOver = redisclient.NewScript(handOverLua)

// ParseHandOver reads the reply of HandOver, or of a backend's own
// hand-over script that answers as it does: {released, acquired}, where
// released is 1 when the script deleted our key, and acquired is the next
// holder's result (1 or 0 for HandOver; a fenced hand-over answers a fence
// or a code of its own). ok is false for any other reply.
func ParseHandOver(v any) (released bool, acquired int64, ok bool) {
	a, isArr := v.([]any)
	if !isArr || len(a) != 2 {
		return false, 0, false
	}
	r, ok1 := a[0].(int64)
	n, ok2 := a[1].(int64)
	return r == 1, n, ok1 && ok2
}
