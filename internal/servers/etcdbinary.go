package servers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// EtcdBinaryPath returns the path of an etcd server program on PATH (for
// example Debian's etcd-server package, etcd 3.4), as opposed to the etcd
// embedded in this process.
func EtcdBinaryPath() (string, bool) {
	p, err := exec.LookPath("etcd")
	return p, err == nil
}

// EtcdProcess is a single-member etcd run from the etcd program as a child
// process, on free 127.0.0.1 ports with a temporary data directory: a
// server version other than the embedded one.
type EtcdProcess struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	out      *syncBuffer
	dir      string
	endpoint string
	version  string
}

// StartEtcdBinary starts the etcd program found by EtcdBinaryPath and waits
// until it reports itself healthy. Call Stop to kill it and remove its
// data.
func StartEtcdBinary() (*EtcdProcess, error) {
	path, ok := EtcdBinaryPath()
	if !ok {
		return nil, errors.New("servers: etcd not found on PATH")
	}
	var err error
	for attempt := 0; attempt < etcdStartAttempts; attempt++ {
		var e *EtcdProcess
		e, err = startEtcdBinary(path)
		if err == nil {
			return e, nil
		}
		if !isAddrInUse(err) {
			break
		}
	}
	return nil, err
}

func startEtcdBinary(path string) (*EtcdProcess, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockswap-etcdbin-")
	if err != nil {
		return nil, fmt.Errorf("servers: etcd temp dir: %w", err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e := &EtcdProcess{out: &syncBuffer{}, dir: dir, endpoint: client, exited: make(chan struct{})}
	cmd := exec.Command(path,
		"--name", "m0",
		"--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "m0="+peer,
		"--initial-cluster-token", fmt.Sprintf("lockswap-%d-%d", os.Getpid(), time.Now().UnixNano()),
		// A single member cannot lose an election: tick fast, as the
		// embedded test members do.
		"--heartbeat-interval", "10", "--election-timeout", "100",
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = e.out, e.out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: start etcd: %w", err)
	}
	e.cmd = cmd
	go func() {
		cmd.Wait()
		close(e.exited)
	}()
	deadline := time.Now().Add(etcdReadyTimeout)
	for {
		select {
		case <-e.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("servers: etcd on %s exited before it was ready: %s\noutput:\n%s", client, cmd.ProcessState, e.out.String())
		default:
		}
		v, err := etcdHTTP(client + "/version")
		if err == nil {
			var body struct {
				Server string `json:"etcdserver"`
			}
			if json.Unmarshal(v, &body) == nil && body.Server != "" {
				if h, err := etcdHTTP(client + "/health"); err == nil && strings.Contains(string(h), `"true"`) {
					e.version = body.Server
					return e, nil
				}
			}
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("servers: etcd on %s not healthy after %s: %v\noutput:\n%s", client, etcdReadyTimeout, err, e.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// etcdHTTP GETs url with a short timeout and returns the body.
func etcdHTTP(url string) ([]byte, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<16))
}

// Endpoints returns the client URL ("http://127.0.0.1:port") of the server.
func (e *EtcdProcess) Endpoints() []string { return []string{e.endpoint} }

// Version is the server version the program reports, such as "3.4.23".
func (e *EtcdProcess) Version() string { return e.version }

// Pause stops the process with SIGSTOP and waits until it has stopped: it
// keeps its connections and answers nothing until Resume. Where SIGSTOP
// does not exist it returns an error matching errors.ErrUnsupported.
func (e *EtcdProcess) Pause() error {
	if err := pauseGroup(e.cmd.Process); err != nil {
		return err
	}
	WaitStopped(e.cmd.Process.Pid)
	return nil
}

// Resume continues a paused process with SIGCONT.
func (e *EtcdProcess) Resume() { resumeGroup(e.cmd.Process) }

// Stop kills the process, waits for it and removes its data directory. It
// is idempotent.
func (e *EtcdProcess) Stop() {
	if e.cmd != nil && e.cmd.Process != nil {
		killGroup(e.cmd.Process)
		<-e.exited
	}
	os.RemoveAll(e.dir)
}
