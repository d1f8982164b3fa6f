package redisclient

import (
	"errors"
	"fmt"
	"net"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/tlscheck"
)

// Classify turns an error of a request to c into a lock error that names
// c's server and keeps err: one that retrying cannot fix (a wrong
// password, a missing permission, an unknown command, a failed script)
// matches lockswap.ErrInvalid and says what to fix; any other matches
// lockswap.ErrUnavailable. A nil err stays nil.
func Classify(c Client, err error) error {
	if err == nil {
		return nil
	}
	if reason := PermanentReason(err); reason != "" {
		return fmt.Errorf("on %s: %s: %w: %w", c, reason, lockswap.ErrInvalid, err)
	}
	return fmt.Errorf("on %s: %w: %w", c, lockswap.ErrUnavailable, err)
}

// Uncertain reports whether err, an error from [Classify], leaves the
// outcome of its request unknown: a transport error (the request may have
// been applied or not), as opposed to an answer of the server. Errors a
// backend makes itself (lockswap.ErrHeld, lockswap.ErrLost) are not.
func Uncertain(err error) bool {
	return errors.Is(err, lockswap.ErrUnavailable) && IsTransport(err)
}

// MaybeApplied reports whether the request that failed with err may have
// run on the server: an error [Uncertain] accepts, except a failure to
// connect (the request was never sent). An attempt that failed so is one
// to undo (driver.Config.Undo).
func MaybeApplied(err error) bool {
	var op *net.OpError
	return Uncertain(err) && !(errors.As(err, &op) && op.Op == "dial")
}

// ClassifyHeld is [Classify] for a request on a key the caller held (an
// extend or a release of its lock): a WRONGTYPE reply there means the key
// now holds another Redis type, so the lock is gone, and the error matches
// lockswap.ErrLost.
func ClassifyHeld(c Client, err error) error {
	if IsWrongType(err) {
		return errNowOtherType
	}
	return Classify(c, err)
}

var errNowOtherType = fmt.Errorf("the key now holds another Redis type: %w", lockswap.ErrLost)

// CertificateReason returns, for an error of a TLS handshake that failed
// over a certificate, what to fix; "" for any other error. That is the
// server's certificate failing verification (signed by a CA the client
// does not trust, for another name, expired), or the server refusing the
// client's certificate or its lack of one (a TLS alert that names a
// certificate). No wait or retry fixes either: it is a configuration
// error (tls_ca=, tls_server_name=, tls_cert=/tls_key=), so [Classify]
// makes it match lockswap.ErrInvalid, not lockswap.ErrUnavailable.
func CertificateReason(err error) string { return tlscheck.Reason(err) }
