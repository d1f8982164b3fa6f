package goredis_test

import (
	"testing"

	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
)

// TestCancelHung: a command whose context has no deadline returns soon
// after that context is cancelled, with the server hung, before and after
// the connection is up.
func TestCancelHung(t *testing.T) { stalltest.RunCancelHung(t, goredis.Dial) }
