// Package badinput holds the test that tries every kind of bad input on
// every backend, on real servers, and checks that each is refused with an
// error matching lockswap.ErrInvalid that names the problem, with no
// password in it and nothing changed on the servers. The same test writes
// the table of docs/bad-input.md from what it saw (LOCKSWAP_UPDATE_DOCS=1
// go test ./internal/badinput/) and fails when the document differs. It has
// no code of its own.
package badinput
