package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"time"
)

// HogCommand is the hidden command under which the lockswap binary
// re-executed by the soak spins as a CPU hog: `lockswap __soak-hog`.
// Busy goroutines inside the soak's own process would not do: they share
// its scheduler, and Go would share its processors between them and the
// cycles rather than leave the cycles to compete with other processes, as
// on a busy machine.
const HogCommand = "__soak-hog"

// Hog spins on one goroutine until stdin ends (EOF or an error) or ctx
// is done. The soak holds the write end of the hog's standard input, so a
// hog ends by itself when the soak dies, even by SIGKILL; the soak stops
// it by PID all the same.
func Hog(ctx context.Context, stdin io.Reader) error {
	var stop atomic.Bool
	go func() {
		for !stop.Load() {
		}
	}()
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	stop.Store(true)
	return nil
}

// selfHog is the default Options.HogCommand: this program re-executed
// with HogCommand.
func selfHog() []string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{exe, HogCommand}
}

// hog is one running hog process.
type hog struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// hogs are the hogs of one run.
type hogs []*hog

// startHogs starts n hogs with command (argv), each with GOMAXPROCS=1 so
// that a Go hog spins on one processor.
func startHogs(n int, command func() []string) (hogs, error) {
	var hs hogs
	for range n {
		argv := command()
		if len(argv) == 0 {
			hs.stop()
			return nil, errors.New("soak: the hog command is empty")
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			hs.stop()
			return nil, fmt.Errorf("soak: hog stdin: %w", err)
		}
		if err := cmd.Start(); err != nil {
			stdin.Close()
			hs.stop()
			return nil, fmt.Errorf("soak: start hog %q: %w", argv, err)
		}
		hs = append(hs, &hog{cmd: cmd, stdin: stdin})
	}
	return hs, nil
}

// pids returns the hogs' process ids.
func (hs hogs) pids() []int {
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i] = h.cmd.Process.Pid
	}
	return out
}

// stop kills every hog by its PID, waits for it, and returns the CPU time
// they used together (user + system) and an error when one had ended
// before it was killed (then it did not hog the whole run).
func (hs hogs) stop() (cpu time.Duration, err error) {
	var errs []error
	for _, h := range hs {
		// A hog that ended by itself exited; a killed one did not.
		h.cmd.Process.Kill()
		h.stdin.Close()
		werr := h.cmd.Wait()
		st := h.cmd.ProcessState
		if st == nil {
			errs = append(errs, fmt.Errorf("soak: hog %d: %w", h.cmd.Process.Pid, werr))
			continue
		}
		cpu += st.UserTime() + st.SystemTime()
		if st.Exited() {
			errs = append(errs, fmt.Errorf("soak: hog %d ended by itself before it was stopped (%v)", h.cmd.Process.Pid, st))
		}
	}
	return cpu, errors.Join(errs...)
}
