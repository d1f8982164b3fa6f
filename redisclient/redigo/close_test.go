package redigo_test

import (
	"testing"

	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

// TestCloseHung: a client=redigo client closes within the bound the
// library promises when its server hangs, fails the commands in flight,
// and leaves no goroutine of its library running.
func TestCloseHung(t *testing.T) {
	stalltest.RunCloseHung(t, redigo.Dial, "github.com/gomodule/redigo/redis.")
}
