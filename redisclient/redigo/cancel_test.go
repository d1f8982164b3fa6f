package redigo_test

import (
	"testing"

	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

// TestCancelHung: a command returns soon after its context (without a
// deadline, or with one far off) is cancelled, with the server hung,
// before and after the connection is up.
func TestCancelHung(t *testing.T) { stalltest.RunCancelHung(t, redigo.Dial, nil) }

// TestSubscribeHung: Subscribe returns soon after its context ends (its
// deadline passes or it is cancelled), with the server hung, before and
// after the connection is up.
func TestSubscribeHung(t *testing.T) { stalltest.RunSubscribeHung(t, redigo.Dial) }

// TestCancelBeforeDeadline: a command whose context is cancelled long
// before its deadline returns soon after the cancellation, with the
// server hung.
func TestCancelBeforeDeadline(t *testing.T) { stalltest.RunCancelBeforeDeadline(t, redigo.Dial) }

// TestCancelTLSHung: a command whose connection is still in its TLS
// handshake with a server that never answers returns soon after its
// context is cancelled, not at redigo's handshake timeout (10 s).
func TestCancelTLSHung(t *testing.T) { stalltest.RunCancelTLSHung(t, redigo.Dial) }

// TestDeadlineOnlyHung: a command under a context with a deadline and no
// Done channel returns at that deadline with the server hung.
func TestDeadlineOnlyHung(t *testing.T) { stalltest.RunDeadlineOnlyHung(t, redigo.Dial) }

// TestCancelWhileDialing: a command returns soon after its context is
// cancelled while another command's connection comes up.
func TestCancelWhileDialing(t *testing.T) { stalltest.RunCancelWhileDialing(t, redigo.Dial) }
