//go:build unix

package servers

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcAttr makes cmd start in its own process group, so that the whole
// group (a redis-server and any child it forked for a rewrite or save) can
// be signalled at once; on Linux the process is also killed if this
// process dies (see setDeathSignal).
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// killGroup kills the process group led by p with SIGKILL; it works on a
// stopped process as well.
func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }

// pauseGroup stops the process group led by p with SIGSTOP. A failed
// kill(2) (the process has already exited) is not reported.
func pauseGroup(p *os.Process) error {
	syscall.Kill(-p.Pid, syscall.SIGSTOP)
	return nil
}

// resumeGroup continues the process group led by p with SIGCONT.
func resumeGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGCONT) }

// StopProcess sends SIGSTOP to the process p alone (not its group), as
// tests do to pause a helper process; see [WaitStopped] to wait until it
// is stopped. Where a process cannot be paused (Windows) it returns an
// error wrapping [errors.ErrUnsupported].
func StopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// ContinueProcess sends SIGCONT to the process p alone. Where
// [StopProcess] is not supported it does nothing and returns nil.
func ContinueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
