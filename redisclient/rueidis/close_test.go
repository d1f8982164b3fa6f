package rueidis_test

import (
	"testing"

	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// TestCloseHung: a client=rueidis client closes within the bound the
// library promises when its server hangs, and leaves no goroutine of
// rueidis running.
func TestCloseHung(t *testing.T) {
	stalltest.RunCloseHung(t, rueidis.Dial, "github.com/redis/rueidis.")
}
