package etcdlease

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/internal/testserver"
)

// faultTTL is the lock TTL of the fault suite: the smallest TTL etcdlease
// accepts (MinTTL: leases are whole seconds).
const faultTTL = MinTTL

// TestFaults runs the shared fault suite: every call keeps its deadline
// when etcd stops answering (a proxy that accepts and holds every byte),
// answers 10 s late (the proxy delays every reply), or is SIGSTOPped (an
// etcd in a child process, see startPausableEtcd); Close returns within a
// second meanwhile.
func TestFaults(t *testing.T) {
	t.Parallel()
	var o conformance.Overruns
	t.Cleanup(func() { t.Log(o.Summary(5)) })
	// The proxied faults share one etcd: each Locker has a proxy of its
	// own, which is what the fault affects, and keys of its own.
	srv := testserver.EtcdT(t)
	target := strings.TrimPrefix(srv.Endpoints()[0], "http://")
	viaProxy := func(fault func(*testserver.Proxy)) func(t *testing.T) (lockswap.Locker, func()) {
		return func(t *testing.T) (lockswap.Locker, func()) {
			p := testserver.ProxyT(t, target)
			lk, err := Open(Config{Endpoints: []string{p.Addr()}, Prefix: "faults/", ClusterSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			return lk, func() { fault(p) }
		}
	}
	faults := []conformance.Fault{
		{Name: "no-reply", NewLocker: viaProxy(func(p *testserver.Proxy) { p.Blackhole(true) })},
		{Name: "slow", NewLocker: viaProxy(func(p *testserver.Proxy) { p.SetDelay(10 * time.Second) })},
		{Name: "paused", NewLocker: func(t *testing.T) (lockswap.Locker, func()) {
			endpoint, pause := startPausableEtcd(t)
			lk, err := Open(Config{Endpoints: []string{endpoint}, Prefix: "faults/", ClusterSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			return lk, pause
		}},
	}
	conformance.RunFaults(t, faultTTL, faults, &o)
}

// etcdChildEnv, set to "1", makes the test binary serve an embedded etcd
// instead of running the tests (see TestMain and startPausableEtcd).
const etcdChildEnv = "LOCKSWAP_ETCDLEASE_ETCD_CHILD"

// TestMain runs the tests, or, in a child started by startPausableEtcd, an
// embedded etcd.
func TestMain(m *testing.M) {
	if os.Getenv(etcdChildEnv) == "1" {
		os.Exit(serveEtcdChild())
	}
	os.Exit(m.Run())
}

// serveEtcdChild starts an embedded etcd, prints its client URL on a line
// of its own and serves until stdin ends (the parent closed it or exited).
func serveEtcdChild() int {
	e, err := testserver.StartEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Close()
	fmt.Println(e.Endpoints()[0])
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startPausableEtcd starts an etcd in a child process (this test binary,
// see TestMain): an embedded etcd cannot be SIGSTOPped without stopping the
// test. It returns the etcd's client URL and a function that pauses the
// child with SIGSTOP. At cleanup the child is continued and stopped, and
// waited for; if the test process dies, the kernel kills the child (see
// setParentDeathSignal).
func startPausableEtcd(t *testing.T) (endpoint string, pause func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	// The child's data directory (under TMPDIR) goes with the test's.
	cmd.Env = append(os.Environ(), etcdChildEnv+"=1", "TMPDIR="+t.TempDir())
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the etcd child: %v", err)
	}
	lines := make(chan string, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	t.Cleanup(func() {
		servers.ContinueProcess(cmd.Process)
		stdin.Close()
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			cmd.Wait()
		}()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Errorf("the etcd child did not stop within 10s of its stdin closing; killing it")
			cmd.Process.Kill()
			<-waited
		}
		<-readerDone
	})
	select {
	case endpoint = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatalf("the etcd child printed no endpoint within 30s (stderr: %s)", stderr.String())
	}
	if !strings.HasPrefix(endpoint, "http://") {
		t.Fatalf("the etcd child failed: stdout %q, stderr: %s", endpoint, stderr.String())
	}
	return endpoint, func() {
		if err := servers.StopProcess(cmd.Process); err != nil {
			t.Fatalf("pause the etcd child: %v", err)
		}
		if !servers.WaitStopped(cmd.Process.Pid) {
			t.Fatal("the etcd child was not seen stopped within 5s of SIGSTOP")
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the writes of exec's copying
// goroutine and a concurrent String.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
