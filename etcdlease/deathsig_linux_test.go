package etcdlease

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel SIGKILL cmd's process when the test
// process dies (a test timeout, a crash), even while it is SIGSTOPped.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
