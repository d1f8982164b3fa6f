package servers

import "syscall"

// setDeathSignal has the kernel kill the child with SIGKILL when this
// process dies (Linux's Pdeathsig), so no server outlives a crashed test
// or command.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
