//go:build !unix

package servers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
)

// setProcAttr does nothing: process groups and Pdeathsig are Unix (and
// Linux) features.
func setProcAttr(*exec.Cmd) {}

// killGroup kills just the process p: there is no process group to kill
// here.
func killGroup(p *os.Process) { p.Kill() }

// pauseGroup reports that a process cannot be paused here: there is no
// SIGSTOP.
func pauseGroup(*os.Process) error { return errUnsupported("pausing a process (SIGSTOP)") }

// resumeGroup does nothing: pauseGroup never paused the process.
func resumeGroup(*os.Process) {}

func errUnsupported(op string) error {
	return fmt.Errorf("servers: %s is not supported on %s: %w", op, runtime.GOOS, errors.ErrUnsupported)
}

// StopProcess sends SIGSTOP to the process p alone (not its group), as
// tests do to pause a helper process; see [WaitStopped] to wait until it
// is stopped. Where a process cannot be paused (here) it returns an error
// wrapping [errors.ErrUnsupported].
func StopProcess(*os.Process) error { return errUnsupported("pausing a process (SIGSTOP)") }

// ContinueProcess sends SIGCONT to the process p alone. Where
// [StopProcess] is not supported (here) it does nothing and returns nil.
func ContinueProcess(*os.Process) error { return nil }
