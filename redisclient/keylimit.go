package redisclient

import (
	"fmt"

	"github.com/lockswap/lockswap"
)

// MaxKeyBytes is the longest Redis key (the backend's prefix and the lock
// key) that the Redis backends accept: 64 KiB. Redis itself takes keys up
// to 512 MB, but every attempt carries the key (a fenced one twice, and
// Redlock to each instance) within a request timeout that adapts to the
// round trips of ordinary keys (Redlock's per-instance timeout may be
// 50 ms): a key of hundreds of kilobytes makes every attempt time out, an
// outage that retrying never ends. A longer key is refused with
// lockswap.ErrInvalid before anything is sent ([CheckKey]).
const MaxKeyBytes = 64 << 10

// CheckKey returns the check of lock keys (driver.Config.CheckKey) of a
// Redis backend that stores lock key k under prefix + k: it refuses a key
// whose Redis key is longer than [MaxKeyBytes], with an error matching
// lockswap.ErrInvalid that gives both lengths.
func CheckKey(prefix string) func(key string) error {
	return func(key string) error {
		if n := len(prefix) + len(key); n > MaxKeyBytes {
			return fmt.Errorf("key too large: the Redis key (prefix + key) is %d bytes, the most is %d (redisclient.MaxKeyBytes): %w",
				n, MaxKeyBytes, lockswap.ErrInvalid)
		}
		return nil
	}
}
