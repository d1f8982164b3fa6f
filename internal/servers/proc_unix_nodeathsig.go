//go:build unix && !linux

package servers

import "syscall"

// setDeathSignal does nothing: only Linux can have a child killed when its
// parent dies. The child still runs in its own process group, which Stop
// and Kill kill.
func setDeathSignal(*syscall.SysProcAttr) {}
