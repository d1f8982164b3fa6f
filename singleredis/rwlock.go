package singleredis

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/redisclient"
)

// A read-write lock (lockswap.WithRead, lockswap.WithWrite) is one Redis
// hash at the key a mutex of the same name would have (docs/keys.md):
//
//	w       the write hold's token
//	we      its expiry, in the server's clock (TIME), in milliseconds
//	r:<t>   the expiry of the read hold whose token is t
//	q:<id>  the end of the mark of writer id's Acquire, which waits
//	        (driver.WriterWait): no new read hold while a mark is live
//
// Tokens and writer ids are 32 hex digits. The hash expires with the
// latest of its live holds and marks (PEXPIRE, set again by every
// acquire, extend and release), is deleted when nothing of it is live, and
// loses the fields of ended holds and marks at the next acquire, granted
// or not; a writer whose Acquire gave up removes its mark
// (driver.Unmarker). A hash
// with other fields is someone else's (a semaphore's, a user's): refused,
// left untouched. A fenced Locker takes every fence of the key from the
// mutex's counter (FenceKey): each hold, read or write, takes the next.
// The scripts check before they write and order their writes as the
// permit scripts do (PEXPIRE, the fence counter's SET, then HSET), so that
// a command the user's ACL denies halfway leaves no hold and no key
// without an expiry.
var (
	rwAcquire = redisclient.NewScript(permitScript(rwCommonLua + rwAcquireLua))
	rwExtend  = redisclient.NewScript(permitScript(rwCommonLua + rwExtendLua))
	rwRelease = redisclient.NewScript(permitScript(rwCommonLua + rwReleaseLua))
	rwUnmark  = redisclient.NewScript(permitScript(rwCommonLua + rwUnmarkLua))

	// rwCommonLua defines rw_fields(k), the hash as a Lua table (w, we,
	// r[token] and q[id], expiries as numbers), or nil and whether it
	// has a semaphore's limit field when it is no read-write lock;
	// rw_last(f, skip, now), the latest expiry of what is live at now
	// (holds and marks) other than the one in field skip ("w",
	// "r:<token>" or "q:<id>"; 0: none); rw_dead(f, now), the fields of
	// the holds and marks that ended; rw_hdel(k, fields), HDEL in batches
	// of 1000 (Lua's unpack has a limit); and rw_own(k, token, mode), the hash k,
	// the field of token's hold of mode ("r" or "w") and its expiry, and
	// the server's clock, or nil when k is no read-write lock or token
	// holds nothing in it.
	//go:embed rw_common.lua
	rwCommonLua string
	// rwAcquireLua takes KEYS = {hash, fence counter (fenced only)},
	// ARGV = {token, TTL ms, "r" or "w", writer id or "", ms left of the
	// writer's wait, fence counter TTL ms or "0" when unfenced}, and
	// answers {code, a, b}: {1, 0, fence} held; {0, why, readers} held
	// by others (why: 1 a writer holds, 2 a writer waits, 3 readers
	// hold); a fence* code (-1 to -3); {-4} a key that is no read-write
	// lock; {-5} a key that holds a mutex; {-6} a key that holds a
	// semaphore.
	//go:embed rw_acquire.lua
	rwAcquireLua string
	// rwExtendLua takes KEYS = {hash}, ARGV = {token, TTL ms, mode}: 1
	// when the token's hold was live and now expires TTL from now, 0 when
	// it is not held.
	//go:embed rw_extend.lua
	rwExtendLua string
	// rwReleaseLua takes KEYS = {hash}, ARGV = {token, mode}: it ends the
	// token's hold (the hash goes when nothing of it is live) and answers
	// 1 when the hold was live, 0 when it was not held.
	//go:embed rw_release.lua
	rwReleaseLua string
	// rwUnmarkLua takes KEYS = {hash}, ARGV = {writer id}: it removes
	// the writer's mark (the hash goes when nothing of it is live, its
	// expiry comes down to the latest live hold's or mark's) and answers
	// 1 when the mark was there, 0 otherwise.
	//go:embed rw_unmark.lua
	rwUnmarkLua string
)

// The codes of the read-write acquire script below 1 that are not fence*
// codes, and the reasons of a held key (code 0).
const (
	rwHeld         = 0
	rwNotRW        = -4
	rwMutexHeld    = -5
	rwSemaphore    = -6
	rwWriterHolds  = 1
	rwWriterWaits  = 2
	rwReadersHold  = 3
	rwModeRead     = "r"
	rwModeWrite    = "w"
	rwNoWriterWait = ""
)

// rwMode is the mode argument of the read-write scripts for c.
func rwMode(c *driver.Claim[ref]) string {
	if c.RW == lockswap.ReadHold {
		return rwModeRead
	}
	return rwModeWrite
}

// Unmark removes writer w's mark on key (driver.Unmarker): its Acquire
// gave up.
func (p *proto) Unmark(ctx context.Context, key string, w driver.WriterWait) error {
	_, err := p.c.Run(ctx, rwUnmark, []string{p.prefix + key}, w.ID)
	return err
}

// acquireRW takes c's read or write hold of its key in one request.
func (p *proto) acquireRW(ctx context.Context, c *driver.Claim[ref]) (driver.Grant, error) {
	k := p.prefix + c.Key
	writer, wait := rwNoWriterWait, int64(0)
	if c.Writer.ID != "" {
		if left := time.Until(c.Writer.Until).Milliseconds(); left > 0 {
			writer, wait = c.Writer.ID, left
		}
	}
	r, ok, v, err := p.runAcquire(ctx, c, rwAcquire, func(fenceTTL int64) []any {
		return []any{c.Token, c.TTL.Milliseconds(), rwMode(c), writer, wait, fenceTTL}
	})
	switch {
	case err != nil:
		return driver.Grant{}, err
	case !ok:
		return driver.Grant{}, fmt.Errorf("unexpected reply %v from the read-write acquire script: %w", v, lockswap.ErrUnavailable)
	case r[0] == 1:
		g := driver.Grant{}
		if p.fence {
			g.Fence = uint64(r[2])
		}
		return g, nil
	case r[0] == rwHeld && r[1] == rwWriterHolds:
		return driver.Grant{}, fmt.Errorf("write hold held: %w", lockswap.ErrHeld)
	case r[0] == rwHeld && r[1] == rwWriterWaits:
		return driver.Grant{}, fmt.Errorf("a writer waits (writer preference): %w", lockswap.ErrHeld)
	case r[0] == rwHeld:
		return driver.Grant{}, fmt.Errorf("%d read holds held: %w", r[2], lockswap.ErrHeld)
	case r[0] == rwMutexHeld:
		return driver.Grant{}, fmt.Errorf("key %s holds a string (a mutex's lock, or a value that is no lock), not a read-write lock; it was left untouched: %w", lockstate.QuoteKey(k), lockswap.ErrInvalid)
	case r[0] == rwSemaphore:
		return driver.Grant{}, fmt.Errorf("key %s holds a counting semaphore's permits, not a read-write lock; it was left untouched: %w", lockstate.QuoteKey(k), lockswap.ErrInvalid)
	case r[0] == rwNotRW:
		return driver.Grant{}, p.notLock(ctx, k)
	}
	return driver.Grant{}, fenceError(FenceKey(k), r[0])
}
