package memlock

import (
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// semaphore is a key's counting semaphore: one entry per slot (a free
// slot has no token, or an expired one). Its fences come from the key's
// one counter (Store.fence), which the mutex shares: they rise per slot,
// across slots, and across a change of the limit, and never repeat.
type semaphore struct {
	slots []entry
}

func (sem *semaphore) limit() int { return len(sem.slots) }

// live counts the permits held at now.
func (sem *semaphore) live(now time.Time) int {
	n := 0
	for _, e := range sem.slots {
		if e.token != "" && now.Before(e.expires) {
			n++
		}
	}
	return n
}

// acquirePermit gives c the first free slot of its key's semaphore, made
// with c.Permits slots when the key has no live permit; a limit other than
// the live permits', or a live mutex on the key, is refused.
func (s store) acquirePermit(c *driver.Claim[struct{}], now time.Time) (driver.Grant, error) {
	if k, name := s.kindOf(c.Key, now); k == mutexKind || k == rwKind {
		return driver.Grant{}, fmt.Errorf("the key is %s, not a counting semaphore's: %w", name, lockswap.ErrInvalid)
	}
	sem := s.sems[c.Key]
	switch {
	case sem == nil || sem.live(now) == 0 && sem.limit() != c.Permits:
		// A new semaphore, or one whose permits have all ended: its limit
		// is the caller's.
		sem = &semaphore{slots: make([]entry, c.Permits)}
		s.sems[c.Key] = sem
	case sem.limit() != c.Permits:
		return driver.Grant{}, fmt.Errorf("limit %d, but the key's permits are held with limit %d: %w", c.Permits, sem.limit(), lockswap.ErrInvalid)
	}
	for i, e := range sem.slots {
		if e.token == "" || !now.Before(e.expires) {
			sem.slots[i] = entry{token: c.Token, expires: now.Add(c.TTL)}
			s.fence[c.Key]++
			return driver.Grant{Fence: s.fence[c.Key], Slot: i}, nil
		}
	}
	return driver.Grant{}, fmt.Errorf("all %d permits held: %w", sem.limit(), lockswap.ErrHeld)
}

// slotOf returns the slot c holds in its key's semaphore and its entry,
// or -1 when c holds none (taken over, or never held).
func (s store) slotOf(c *driver.Claim[struct{}]) (*semaphore, int) {
	sem := s.sems[c.Key]
	if sem == nil {
		return nil, -1
	}
	for i, e := range sem.slots {
		if e.token == c.Token {
			return sem, i
		}
	}
	return sem, -1
}

// extendPermit moves c's expiry to ttl from now if c still holds its slot.
func (s store) extendPermit(c *driver.Claim[struct{}], ttl time.Duration) error {
	sem, i := s.slotOf(c)
	if i < 0 {
		return lostErr(entry{}, false, c)
	}
	if !time.Now().Before(sem.slots[i].expires) {
		return lostErr(sem.slots[i], true, c)
	}
	sem.slots[i].expires = time.Now().Add(ttl)
	return nil
}

// releasePermit frees c's slot if c still holds it; the semaphore goes
// when no permit of it is left.
func (s store) releasePermit(c *driver.Claim[struct{}]) error {
	sem, i := s.slotOf(c)
	if i < 0 {
		return lostErr(entry{}, false, c)
	}
	e := sem.slots[i]
	sem.slots[i] = entry{}
	if sem.live(time.Now()) == 0 {
		delete(s.sems, c.Key)
	}
	if !time.Now().Before(e.expires) {
		return lostErr(e, true, c)
	}
	return nil
}
