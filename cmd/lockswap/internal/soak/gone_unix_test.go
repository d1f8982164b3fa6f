//go:build unix

package soak_test

import (
	"errors"
	"syscall"
)

// processGone reports whether no process has the id pid (kill -0 fails
// with ESRCH), and the error of kill -0 otherwise.
func processGone(pid int) (bool, error) {
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH), err
}
