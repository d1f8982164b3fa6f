package driver

import "errors"

// GaveUp wraps err, the error of a driver's Release (or the release error
// of its HandOver), to tell the kit that the lock is given up all the
// same: the driver goes on with what is left of the release in its own
// background work (a quorum protocol asks again, instance by instance,
// those whose answer is missing), so the lock no longer excludes anyone
// its holder can count on. The kit then ends the lock (Done closes, the
// next local waiter tries), marks it released (a later Release does
// nothing and returns nil) and returns the error, which keeps err and
// matches what err matches. Without it, an error other than one matching
// lockswap.ErrLost leaves the lock as it was.
func GaveUp(err error) error {
	if err == nil {
		return nil
	}
	return &gaveUpError{err: err}
}

type gaveUpError struct{ err error }

func (e *gaveUpError) Error() string { return e.err.Error() }
func (e *gaveUpError) Unwrap() error { return e.err }

// gaveUp reports whether err came from [GaveUp].
func gaveUp(err error) bool {
	var g *gaveUpError
	return errors.As(err, &g)
}
