//go:build !linux

package etcdlease

import "os/exec"

// setParentDeathSignal does nothing where the kernel offers no parent death
// signal: a child left paused by a crashed test must be killed by hand.
func setParentDeathSignal(*exec.Cmd) {}
