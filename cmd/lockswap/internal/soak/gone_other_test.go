//go:build !unix

package soak_test

// processGone cannot tell without kill -0: it reports the process gone.
func processGone(int) (bool, error) { return true, nil }
