package rueidis_test

import (
	"testing"

	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// TestCancelHung: a command whose context has no deadline returns soon
// after that context is cancelled, with the server hung, before and after
// the connection is up.
func TestCancelHung(t *testing.T) { stalltest.RunCancelHung(t, rueidis.Dial) }
