package memlock

import (
	"context"
	"fmt"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
)

// rwlock is a key's read-write lock: at most one writer, or any number of
// readers, and the marks of the writers waiting for it (writer
// preference: no new reader while a mark is live). Its fences come from
// the key's one counter (Store.fence), shared with the mutex and the
// semaphore: every hold, read or write, takes the next one.
type rwlock struct {
	writer  entry                // token "" when there is none
	readers map[string]time.Time // a reader's token: its expiry
	waiting map[string]time.Time // a waiting writer's ID (driver.WriterWait): its mark's end
}

// live reports whether a hold of rw is live at now.
func (rw *rwlock) live(now time.Time) bool {
	return rw.writerLive(now) || rw.readersLive(now) > 0
}

func (rw *rwlock) writerLive(now time.Time) bool {
	return rw.writer.token != "" && now.Before(rw.writer.expires)
}

// readersLive counts the live read holds, and forgets the expired ones.
func (rw *rwlock) readersLive(now time.Time) int {
	for t, exp := range rw.readers {
		if !now.Before(exp) {
			delete(rw.readers, t)
		}
	}
	return len(rw.readers)
}

// writerWaits reports whether a writer's mark is live at now, and forgets
// the ended ones.
func (rw *rwlock) writerWaits(now time.Time) bool {
	for id, until := range rw.waiting {
		if !now.Before(until) {
			delete(rw.waiting, id)
		}
	}
	return len(rw.waiting) > 0
}

// kind is what holds a key: a mutex, a semaphore and a read-write lock on
// one key are refused, not mixed.
type kind uint8

const (
	free kind = iota
	mutexKind
	semaphoreKind
	rwKind
)

// kindOf returns what holds key at now, and how to name it in an error.
func (s store) kindOf(key string, now time.Time) (kind, string) {
	if e, ok := s.locks[key]; ok && now.Before(e.expires) {
		return mutexKind, "a mutex's"
	}
	if sem := s.sems[key]; sem != nil && sem.live(now) > 0 {
		return semaphoreKind, fmt.Sprintf("a counting semaphore's (limit %d)", sem.limit())
	}
	if rw := s.rws[key]; rw != nil && (rw.live(now) || rw.writerWaits(now)) {
		return rwKind, "a read-write lock's"
	}
	return free, ""
}

// acquireRW gives c its read or write hold of its key's read-write lock
// when no conflicting hold is live (and, for a reader, no writer waits).
func (s store) acquireRW(c *driver.Claim[struct{}], now time.Time) (driver.Grant, error) {
	if k, name := s.kindOf(c.Key, now); k != free && k != rwKind {
		return driver.Grant{}, fmt.Errorf("the key is %s, not a read-write lock's: %w", name, lockswap.ErrInvalid)
	}
	rw := s.rws[c.Key]
	if rw == nil {
		rw = &rwlock{readers: map[string]time.Time{}, waiting: map[string]time.Time{}}
		s.rws[c.Key] = rw
	}
	switch c.RW {
	case lockswap.ReadHold:
		if rw.writerLive(now) {
			return driver.Grant{}, fmt.Errorf("write hold held: %w", lockswap.ErrHeld)
		}
		if rw.writerWaits(now) {
			return driver.Grant{}, fmt.Errorf("a writer waits (writer preference): %w", lockswap.ErrHeld)
		}
		rw.readers[c.Token] = now.Add(c.TTL)
	default:
		if n := rw.readersLive(now); rw.writerLive(now) || n > 0 {
			if c.Writer.ID != "" {
				rw.waiting[c.Writer.ID] = c.Writer.Until
			}
			if n > 0 {
				return driver.Grant{}, fmt.Errorf("%d read holds held: %w", n, lockswap.ErrHeld)
			}
			return driver.Grant{}, fmt.Errorf("write hold held: %w", lockswap.ErrHeld)
		}
		delete(rw.waiting, c.Writer.ID)
		rw.writer = entry{token: c.Token, expires: now.Add(c.TTL)}
	}
	s.fence[c.Key]++
	return driver.Grant{Fence: s.fence[c.Key]}, nil
}

// holdOf returns c's expiry in its key's read-write lock, and false when
// c holds nothing there (taken over, released, or never held).
func (s store) holdOf(c *driver.Claim[struct{}]) (*rwlock, time.Time, bool) {
	rw := s.rws[c.Key]
	if rw == nil {
		return nil, time.Time{}, false
	}
	if c.RW == lockswap.ReadHold {
		exp, ok := rw.readers[c.Token]
		return rw, exp, ok
	}
	return rw, rw.writer.expires, rw.writer.token == c.Token
}

// extendRW moves c's expiry to ttl from now if c still holds its hold.
func (s store) extendRW(c *driver.Claim[struct{}], ttl time.Duration) error {
	rw, exp, ok := s.holdOf(c)
	now := time.Now()
	if !ok {
		return lostErr(entry{}, false, c)
	}
	if !now.Before(exp) {
		return lostErr(entry{token: c.Token}, true, c)
	}
	if c.RW == lockswap.ReadHold {
		rw.readers[c.Token] = now.Add(ttl)
	} else {
		rw.writer.expires = now.Add(ttl)
	}
	return nil
}

// Unmark removes writer w's mark on key (driver.Unmarker): its Acquire
// gave up.
func (s store) Unmark(_ context.Context, key string, w driver.WriterWait) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rw := s.rws[key]; rw != nil {
		delete(rw.waiting, w.ID)
		if now := time.Now(); !rw.live(now) && !rw.writerWaits(now) {
			delete(s.rws, key)
		}
	}
	return nil
}

// releaseRW ends c's hold if c still has it; the read-write lock goes
// when nothing of it (hold or writer's mark) is left.
func (s store) releaseRW(c *driver.Claim[struct{}]) error {
	rw, exp, ok := s.holdOf(c)
	if !ok {
		return lostErr(entry{}, false, c)
	}
	if c.RW == lockswap.ReadHold {
		delete(rw.readers, c.Token)
	} else {
		rw.writer = entry{}
	}
	now := time.Now()
	if !rw.live(now) && !rw.writerWaits(now) {
		delete(s.rws, c.Key)
	}
	if !now.Before(exp) {
		return lostErr(entry{token: c.Token}, true, c)
	}
	return nil
}
