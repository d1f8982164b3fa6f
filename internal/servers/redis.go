// Package servers starts real servers on 127.0.0.1: redis-server
// processes, a fault-injecting TCP proxy and embedded etcd members or
// clusters. The lockswap command starts them for compare and bench, and
// tests start them through internal/testserver, which adds the helpers that
// take a testing.TB. This package does not import testing, so the command
// does not link it; no library package may import it (internal/layers
// checks both).
package servers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// redisReadyTimeout bounds how long StartRedis and Restart wait for PING.
// A bound, not a wait: a server answers as soon as it is up. It is long
// for a busy machine: a server restarted under a test's clients, beside
// CPU hogs, once answered no PING for 5 s (its accept queue full of their
// reconnections, SYNs dropped).
const redisReadyTimeout = 30 * time.Second

// redisPingTimeout bounds one PING of the readiness check: more than the
// first SYN retransmission (1 s), so that a dropped SYN is retried within
// one PING rather than ending it.
const redisPingTimeout = 1500 * time.Millisecond

// RedisOptions configures a redis-server process started by StartRedis.
type RedisOptions struct {
	// Persistence enables the append-only file with fsync on every write, so
	// data survives Kill and Restart. When false nothing is written to disk.
	Persistence bool
	// Args are extra redis-server arguments appended last, so they override
	// the defaults (for example []string{"--maxmemory", "10mb"}).
	Args []string
	// Port is the TCP port to listen on; 0 picks a free port.
	Port int
	// ReplicaOf makes the server a replica of the given "host:port".
	ReplicaOf string
}

// Redis is a redis-server child process listening on 127.0.0.1.
// Its methods are safe for concurrent use.
type Redis struct {
	path string
	opts RedisOptions
	dir  string
	port int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	out     *syncBuffer
	stopped bool
}

// RedisServerPath returns the path of redis-server found on PATH and whether
// it was found.
func RedisServerPath() (string, bool) {
	p, err := exec.LookPath("redis-server")
	return p, err == nil
}

// StartRedis starts redis-server on 127.0.0.1 with a fresh temporary
// directory and waits until it answers PING. On Unix the process runs in
// its own process group, and on Linux it is killed if the parent process
// dies (Pdeathsig).
// Call Stop to kill it and remove its directory.
func StartRedis(opts RedisOptions) (*Redis, error) {
	path, ok := RedisServerPath()
	if !ok {
		return nil, errors.New("servers: redis-server not found on PATH")
	}
	if opts.ReplicaOf != "" {
		if _, _, err := net.SplitHostPort(opts.ReplicaOf); err != nil {
			return nil, fmt.Errorf("servers: ReplicaOf %q: %w", opts.ReplicaOf, err)
		}
	}
	opts.Args = append([]string(nil), opts.Args...)
	dir, err := os.MkdirTemp("", "lockswap-redis-")
	if err != nil {
		return nil, fmt.Errorf("servers: redis temp dir: %w", err)
	}
	r := &Redis{path: path, opts: opts, dir: dir}

	attempts := 1
	if opts.Port == 0 {
		attempts = 5 // a free port may be taken by someone else before redis binds it
	}
	for i := 0; i < attempts; i++ {
		r.port = opts.Port
		if r.port == 0 {
			ports, perr := FreePorts(1)
			if perr != nil {
				err = perr
				break
			}
			r.port = ports[0]
		}
		r.mu.Lock()
		err = r.startLocked()
		r.mu.Unlock()
		if err == nil {
			return r, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, err
}

// args returns the redis-server command line (without the program name).
func (r *Redis) args() []string {
	a := []string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--save", "",
		"--protected-mode", "no",
		// Replicas sync at once instead of after the default 5s delay.
		"--repl-diskless-sync-delay", "0",
	}
	if r.opts.Persistence {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if r.opts.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(r.opts.ReplicaOf)
		a = append(a, "--replicaof", host, port)
	}
	return append(a, r.opts.Args...)
}

// startLocked starts the process on r.port and waits until it answers PING.
// On failure the process is killed and reaped. r.mu must be held.
func (r *Redis) startLocked() error {
	out := &syncBuffer{}
	cmd := exec.Command(r.path, r.args()...)
	cmd.Dir = r.dir
	cmd.Stdout = out
	cmd.Stderr = out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("servers: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	r.cmd, r.exited, r.out = cmd, exited, out

	addr := r.Addr()
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		select {
		case <-exited:
			r.cmd = nil
			return fmt.Errorf("servers: redis-server on %s exited before it was ready: %s\noutput:\n%s",
				addr, cmd.ProcessState, out.String())
		default:
		}
		if err := pingRedis(addr, redisPingTimeout); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			r.killLocked()
			return fmt.Errorf("servers: redis-server on %s not ready after %s: %w\noutput:\n%s",
				addr, redisReadyTimeout, err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pingRedis sends PING over a new connection and expects +PONG.
func pingRedis(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// Addr returns the "127.0.0.1:port" address the server listens on.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port returns the TCP port the server listens on; it stays the same across
// Kill and Restart.
func (r *Redis) Port() int { return r.port }

// Dir returns the server's working directory (where an AOF is written).
func (r *Redis) Dir() string { return r.dir }

// Pid returns the process id of the running server, or 0 if it is not running.
func (r *Redis) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Output returns what the current (or last) process wrote to stdout/stderr.
func (r *Redis) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		return ""
	}
	return r.out.String()
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it to
// exit. The port and directory are kept so Restart can bring it back.
func (r *Redis) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killLocked()
}

func (r *Redis) killLocked() {
	if r.cmd == nil {
		return
	}
	// Kill the whole process group (redis may have forked a child for a
	// rewrite or save); it works on a paused process as well. Where there
	// are no process groups (Windows) just the process is killed.
	select {
	case <-r.exited:
	default:
		killGroup(r.cmd.Process)
		<-r.exited
	}
	r.cmd = nil
}

// Restart starts the server again on the same port and directory with the
// same arguments, killing it first if it is still running, and waits until
// it answers PING. With Persistence the data written before Kill is back.
func (r *Redis) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("servers: Restart after Stop")
	}
	r.killLocked()
	// The old process's socket may linger briefly; retry binding a little.
	var err error
	for i := 0; i < 5; i++ {
		err = r.startLocked()
		if err == nil || !strings.Contains(err.Error(), "Address already in use") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Pause stops the process with SIGSTOP: connections stay open but nothing
// is answered, like a server stalled by a long GC pause or a frozen VM. It
// returns once the process is stopped. Where a process cannot be paused
// (Windows: no SIGSTOP) it does nothing and returns an error wrapping
// [errors.ErrUnsupported].
func (r *Redis) Pause() error {
	r.mu.Lock()
	cmd := r.cmd
	if cmd != nil {
		if err := pauseGroup(cmd.Process); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	r.mu.Unlock()
	if cmd != nil {
		WaitStopped(cmd.Process.Pid)
	}
	return nil
}

// Resume continues a paused process with SIGCONT. Where Pause is not
// supported it does nothing.
func (r *Redis) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		resumeGroup(r.cmd.Process)
	}
}

// Stop kills the server and removes its directory. It is idempotent; the
// server cannot be restarted afterwards.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killLocked()
	if !r.stopped {
		r.stopped = true
		os.RemoveAll(r.dir)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. Another process may still take one before it is bound, so
// callers should retry on a bind failure.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("servers: find free port: %w", err)
		}
		// Keep the listener open until all ports are chosen so they differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
