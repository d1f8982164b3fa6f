package singleredis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/redisclient"
)

// A counting semaphore (lockswap.WithPermits) is one Redis hash at the
// key a mutex of the same name would have (docs/keys.md):
//
//	limit  the limit every holder gave
//	t<k>   the token of the permit in slot k (0 ≤ k < limit)
//	e<k>   its expiry, in the server's clock (TIME), in milliseconds
//
// The hash expires with its longest-lived permit (PEXPIRE, set again by
// every acquire, extend and release) and is deleted with its last live
// one. A hash with other fields, or a limit that is not an integer from 1
// to lockswap.MaxPermits, is someone else's: refused, left untouched. A fenced Locker takes every fence of the
// key, the mutex's and the permits', from the mutex's counter (FenceKey):
// a slot's fence rises with each holder, across slots and across a change
// of the limit, and never repeats. Each operation is one script; every
// script checks before it writes, so a refused call changes nothing, and
// orders its writes so that a command the user's ACL denies halfway
// leaves no permit and no key without an expiry: PEXPIRE (nothing, on a
// key that does not exist yet) and the fence counter's SET come before
// the HSET that stores the permit.
var (
	permitAcquire = redisclient.NewScript(permitScript(permitAcquireLua))
	permitExtend  = redisclient.NewScript(permitScript(permitExtendLua))
	permitRelease = redisclient.NewScript(permitScript(permitReleaseLua))

	// permitCommonLua defines permit_now() (the server's clock in
	// milliseconds); permit_fields(k), the hash as a Lua table with its
	// limit as f.n, or nil when it is no semaphore (a limit that is not
	// an integer from 1 to MAX_PERMITS, which permitScript replaces by
	// lockswap.MaxPermits, or a field other than limit, t<k> and e<k> for
	// k below the limit: a hash of someone else's, which the scripts
	// leave untouched); permit_slot(f, token), the slot token holds in f,
	// or nil; permit_own(k, token), the hash k, the slot token holds in it
	// and the server's clock, or nil when k is no semaphore or token holds
	// no slot; and permit_last(f, skip, now), the latest expiry of the
	// permits live at now other than slot skip's (0: none).
	//go:embed permit_common.lua
	permitCommonLua string
	// permitAcquireLua takes KEYS = {hash, fence counter (fenced only)},
	// ARGV = {token, TTL ms, limit, fence counter TTL ms or "0" when
	// unfenced}, and answers {code, a, b}: {1, slot, fence} held;
	// {0, limit} every permit held; a fence* code (-1 to -3) for a counter
	// that cannot give a fence; {-4} a key that is not a semaphore;
	// {-5} a key that holds a mutex; {-6, limit} permits held with another
	// limit.
	//go:embed permit_acquire.lua
	permitAcquireLua string
	// permitExtendLua takes KEYS = {hash}, ARGV = {token, TTL ms}: 1 when
	// the token's permit was live and now expires TTL from now, 0 when it
	// is not held (expired, released, or taken over).
	//go:embed permit_extend.lua
	permitExtendLua string
	// permitReleaseLua takes KEYS = {hash}, ARGV = {token}: it frees the
	// token's slot (the hash goes with its last live permit) and answers 1
	// when the permit was live, 0 when it was not held.
	//go:embed permit_release.lua
	permitReleaseLua string
)

// permitScript is a permit script's source: the fence functions (which
// also switch an old Redis to effects replication, so that writes may
// follow TIME), then permitCommonLua, then body.
func permitScript(body string) string {
	common := strings.ReplaceAll(permitCommonLua, "MAX_PERMITS", strconv.Itoa(lockswap.MaxPermits))
	return redisscript.FenceCounterLua + nextFenceLua + common + body
}

// The codes of the permit acquire script below 1 that are not fence*
// codes.
const (
	permitsHeld      = 0  // every permit is held
	permitNotSem     = -4 // the key holds something other than a semaphore
	permitMutexHeld  = -5 // the key holds a mutex
	permitOtherLimit = -6 // the key's permits are held with another limit
)

// runAcquire runs script, a hash kind's acquire (a permit's, a read-write
// hold's), for c: KEYS = {the key, its fence counter when fenced}, ARGV =
// args(the fence counter's TTL in ms, 0 when unfenced). It returns the
// script's reply {code, a, b} in r's first three elements (ok false: the
// reply v has another shape), or the request's error, classified.
func (p *proto) runAcquire(ctx context.Context, c *driver.Claim[ref], script *redisclient.Script, args func(fenceTTL int64) []any) (r [5]int64, ok bool, v any, err error) {
	k := p.prefix + c.Key
	c.Data.set(k, c.Token)
	keys, fenceTTL := c.Data.keys[:], int64(0)
	if p.fence {
		keys, fenceTTL = []string{k, FenceKey(k)}, fenceCounterTTL.Milliseconds()
	}
	v, err = p.c.Run(ctx, script, keys, args(fenceTTL)...)
	if err != nil {
		if redisclient.IsWrongType(err) {
			return r, false, nil, fmt.Errorf("the fence counter %s holds another Redis type: %w", lockstate.QuoteKey(FenceKey(k)), lockswap.ErrInvalid)
		}
		return r, false, nil, redisclient.Classify(p.c, err)
	}
	r, ok = fairReply(v)
	return r, ok, v, nil
}

// acquirePermit takes one of c.Permits permits of c's key in one
// request.
func (p *proto) acquirePermit(ctx context.Context, c *driver.Claim[ref]) (driver.Grant, error) {
	k := p.prefix + c.Key
	r, ok, v, err := p.runAcquire(ctx, c, permitAcquire, func(fenceTTL int64) []any {
		return []any{c.Token, c.TTL.Milliseconds(), c.Permits, fenceTTL}
	})
	switch {
	case err != nil:
		return driver.Grant{}, err
	case !ok:
		return driver.Grant{}, fmt.Errorf("unexpected reply %v from the permit acquire script: %w", v, lockswap.ErrUnavailable)
	case r[0] == 1:
		g := driver.Grant{Slot: int(r[1])}
		if p.fence {
			g.Fence = uint64(r[2])
		}
		return g, nil
	case r[0] == permitsHeld:
		return driver.Grant{}, fmt.Errorf("all %d permits held: %w", r[1], lockswap.ErrHeld)
	}
	if err := p.permitRefused(ctx, k, c, r[0], r[1]); err != nil {
		return driver.Grant{}, err
	}
	return driver.Grant{}, fenceError(FenceKey(k), r[0])
}

// permitRefused is the error of a permit script's refusal with code (a:
// the key's limit for permitOtherLimit) for the Redis key k, nil for a
// code that is no refusal (a grant, a wait, a fence code).
func (p *proto) permitRefused(ctx context.Context, k string, c *driver.Claim[ref], code, a int64) error {
	switch code {
	case permitMutexHeld:
		return fmt.Errorf("key %s holds a string (a mutex's lock, or a value that is no lock), not a counting semaphore's permits; it was left untouched: %w", lockstate.QuoteKey(k), lockswap.ErrInvalid)
	case permitOtherLimit:
		return fmt.Errorf("limit %d, but the permits of key %s are held with limit %d; it was left untouched: %w", c.Permits, lockstate.QuoteKey(k), a, lockswap.ErrInvalid)
	case permitNotSem:
		return p.notLock(ctx, k)
	}
	return nil
}
