// Package redisscript holds the Lua scripts that more than one Redis
// backend runs, each once, as a .lua file next to this one: the standard
// single-instance lock's release (compare-and-delete), extend
// (compare-and-pexpire) and hand-over. singleredis and redlock use all
// three, legacysetnx the release. A script that only one backend runs
// lives in that backend's folder.
//
// Every script takes its keys and values through KEYS and ARGV. The files
// hold the exact bytes of the scripts (the single-line ones end without a
// newline), so that their SHA1 stays what it was when they were Go string
// literals.
package redisscript

import (
	_ "embed"

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
