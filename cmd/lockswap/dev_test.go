package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/servers"
)

// TestCLIDevEtcd: lockswap dev etcd serves an etcd that the etcd:// URL it
// prints opens, as a new user would run it; Ctrl-C stops it (exit 0) and
// frees the port.
func TestCLIDevEtcd(t *testing.T) {
	ports, err := servers.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(lockswapBinary(t), "dev", "etcd", "--listen", addr)
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	// The URL it suggests, read from its output (bounded by the test's
	// timeout: the command prints it once the member is ready).
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`LOCKSWAP_URL='([^']+)'`)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if m := re.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	var url string
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("lockswap dev etcd printed no URL; stderr:\n%s", errb.String())
		}
		url = u
	case <-time.After(time.Minute):
		t.Fatalf("lockswap dev etcd not ready after a minute; stderr:\n%s", errb.String())
	}
	if !strings.HasPrefix(url, "etcd://"+addr) {
		t.Fatalf("suggested URL %q does not name %s", url, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk, err := backend.OpenURL(ctx, url)
	if err != nil {
		t.Fatalf("OpenURL(%q): %v", url, err)
	}
	l, err := lk.Acquire(ctx, "dev", lockswap.WithTTL(5*time.Second))
	if err != nil {
		t.Fatalf("Acquire on lockswap dev etcd: %v", err)
	}
	if _, ok := l.Fence(); !ok {
		t.Errorf("an etcd lock carries a fence; got none")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	lk.Close()

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("lockswap dev etcd still running a minute after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after Ctrl-C, want 0; stderr:\n%s", code, errb.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after lockswap dev etcd exited", addr)
	}
}

// TestCLIDevUsage: dev's mistakes exit 2 with one line naming them, and -h
// explains it.
func TestCLIDevUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev"}, "lockswap dev etcd"},
		{[]string{"dev", "redis"}, `"redis"`},
		{[]string{"dev", "etcd", "--bogus"}, "-bogus"},
		{[]string{"dev", "etcd", "--listen", "nowhere"}, "nowhere"},
	} {
		code, out, errOut := runBinary(t, time.Minute, tc.args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != exitUsage || out != "" || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("lockswap %v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
	for _, args := range [][]string{{"dev", "-h"}, {"dev", "etcd", "-h"}} {
		code, out, errOut := runBinary(t, time.Minute, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "lockswap dev etcd") || !strings.Contains(out, "exit codes:") {
			t.Errorf("lockswap %v: exit %d, stderr %q, stdout:\n%s", args, code, errOut, out)
		}
	}
}
