package goredis_test

import (
	"testing"

	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
)

// TestCloseHung: a client=goredis client closes within the bound the
// library promises when its server hangs, fails the commands in flight,
// and leaves no goroutine of its library running.
func TestCloseHung(t *testing.T) {
	stalltest.RunCloseHung(t, goredis.Dial, "github.com/redis/go-redis/v9")
}
