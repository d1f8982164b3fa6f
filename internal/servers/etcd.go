package servers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EtcdLogEnv is the environment variable that, when set to "1", lets
// embedded etcd members log to stderr at info level.
const EtcdLogEnv = "LOCKSWAP_ETCD_LOG"

// etcdReadyTimeout bounds how long a member may take to become ready.
const etcdReadyTimeout = 20 * time.Second

// etcdStartAttempts is how often a start is retried with new ports when a
// port chosen as free was taken before etcd could bind it.
const etcdStartAttempts = 3

// Etcd is a single-member embedded etcd server on 127.0.0.1 whose data lives
// in a temporary directory.
type Etcd struct {
	// Member is the embedded server, for tests that need its internals.
	Member *embed.Etcd

	dir       string
	endpoints []string
	closeOnce sync.Once
}

// EtcdCluster is an embedded etcd cluster of several members in this
// process. Its methods are safe for concurrent use.
type EtcdCluster struct {
	mu        sync.Mutex
	members   []*embed.Etcd
	stopped   []bool
	dirs      []string
	endpoints []string // client URL of each member, by index
	closed    bool
}

// memberSpec describes one member of a cluster being started.
type memberSpec struct {
	name                string
	dir                 string
	clientURL, peerURL  url.URL
	initialCluster, tok string
}

// newMemberConfig returns a quiet, fast-ticking embed.Config for one member.
func newMemberConfig(m memberSpec) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.InitialCluster = m.initialCluster
	cfg.InitialClusterToken = m.tok
	cfg.ClusterState = embed.ClusterStateFlagNew
	// A NOP zap logger silences etcd entirely (LogLevel "error" alone still
	// prints warnings turned errors, e.g. about peers going away). Set
	// LOCKSWAP_ETCD_LOG=1 to get etcd's own logs on stderr instead.
	if os.Getenv(EtcdLogEnv) != "1" {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	}
	// Test data need not survive a machine crash.
	cfg.UnsafeNoFsync = true
	// Faster elections than the 100ms/1s defaults, still safe on a busy
	// two-core machine running the race detector. A single member cannot
	// lose an election, so it ticks faster still and is ready sooner.
	cfg.TickMs, cfg.ElectionMs = 50, 500
	if !strings.Contains(m.initialCluster, ",") {
		cfg.TickMs, cfg.ElectionMs = 10, 100
	}
	return cfg
}

// startMembers starts an n-member cluster on free ports and waits until all
// members are ready, retrying with new ports if one was taken meanwhile. On
// error every started member is closed and every directory removed.
func startMembers(n int) (members []*embed.Etcd, dirs, endpoints []string, err error) {
	for attempt := 0; attempt < etcdStartAttempts; attempt++ {
		members, dirs, endpoints, err = tryStartMembers(n)
		if err == nil || !isAddrInUse(err) {
			return members, dirs, endpoints, err
		}
	}
	return nil, nil, nil, err
}

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

func tryStartMembers(n int) ([]*embed.Etcd, []string, []string, error) {
	if n < 1 {
		return nil, nil, nil, fmt.Errorf("servers: etcd cluster of %d members", n)
	}
	ports, err := FreePorts(2 * n)
	if err != nil {
		return nil, nil, nil, err
	}
	specs := make([]memberSpec, n)
	var initial []string
	tok := fmt.Sprintf("lockswap-%d-%d", os.Getpid(), time.Now().UnixNano())
	for i := range specs {
		s := &specs[i]
		s.name = fmt.Sprintf("m%d", i)
		s.clientURL = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])}
		s.peerURL = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		s.tok = tok
		initial = append(initial, s.name+"="+s.peerURL.String())
	}
	dirs := make([]string, 0, n)
	cleanupDirs := func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	for i := range specs {
		d, err := os.MkdirTemp("", "lockswap-etcd-")
		if err != nil {
			cleanupDirs()
			return nil, nil, nil, fmt.Errorf("servers: etcd temp dir: %w", err)
		}
		dirs = append(dirs, d)
		specs[i].dir = d
		specs[i].initialCluster = strings.Join(initial, ",")
	}

	// embed.StartEtcd does not wait for a quorum, so the members are
	// launched one after another and only the wait for readiness runs
	// concurrently. Launching them in parallel costs ~1s per peer: a new
	// member first asks its peers whether it was bootstrapped already, and a
	// peer whose port is bound but not yet served lets that ask time out.
	members := make([]*embed.Etcd, n)
	errs := make([]error, n)
	for i := range specs {
		e, err := embed.StartEtcd(newMemberConfig(specs[i]))
		if err != nil {
			errs[i] = fmt.Errorf("servers: start etcd member %s: %w", specs[i].name, err)
			break
		}
		members[i] = e
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdReadyTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, e := range members {
		if members[n-1] == nil {
			break // a member failed to launch: do not wait for a quorum
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-e.Server.ReadyNotify():
			case err := <-e.Err():
				errs[i] = fmt.Errorf("servers: etcd member %s failed: %w", specs[i].name, err)
			case <-ctx.Done():
				errs[i] = fmt.Errorf("servers: etcd member %s not ready after %s", specs[i].name, etcdReadyTimeout)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeMembers(members)
		cleanupDirs()
		return nil, nil, nil, err
	}
	endpoints := make([]string, n)
	for i, s := range specs {
		endpoints[i] = s.clientURL.String()
	}
	return members, dirs, endpoints, nil
}

// closeMembers closes the non-nil members, waiting for their goroutines
// (embed's Close does). Followers are closed first, concurrently, then the
// leader: a leader closed while its followers are up hands its leadership
// over first, and one closed while they are closing too waits for that
// handover until a request timeout (~6s).
func closeMembers(members []*embed.Etcd) {
	var followers, leaders []*embed.Etcd
	for _, e := range members {
		switch {
		case e == nil:
		case e.Server.Lead() == uint64(e.Server.MemberID()):
			leaders = append(leaders, e)
		default:
			followers = append(followers, e)
		}
	}
	for _, group := range [][]*embed.Etcd{followers, leaders} {
		var wg sync.WaitGroup
		for _, e := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.Close()
			}()
		}
		wg.Wait()
	}
}

// StartEtcd starts a single-member embedded etcd with client and peer URLs
// on free 127.0.0.1 ports and waits until it is ready. Call Close to stop it
// and remove its data.
func StartEtcd() (*Etcd, error) {
	members, dirs, endpoints, err := startMembers(1)
	if err != nil {
		return nil, err
	}
	return &Etcd{Member: members[0], dir: dirs[0], endpoints: endpoints}, nil
}

// Endpoints returns the client URL ("http://127.0.0.1:port") of the server.
func (e *Etcd) Endpoints() []string { return append([]string(nil), e.endpoints...) }

// Close stops the server, waits for all of its goroutines and removes its
// data directory. It is idempotent.
func (e *Etcd) Close() {
	e.closeOnce.Do(func() {
		e.Member.Close()
		os.RemoveAll(e.dir)
	})
}

// StartEtcdCluster starts an n-member embedded etcd cluster, all members
// concurrently, and waits until every member is ready. Call Close to stop
// it and remove its data.
func StartEtcdCluster(n int) (*EtcdCluster, error) {
	members, dirs, endpoints, err := startMembers(n)
	if err != nil {
		return nil, err
	}
	return &EtcdCluster{
		members:   members,
		stopped:   make([]bool, n),
		dirs:      dirs,
		endpoints: endpoints,
	}, nil
}

// Endpoints returns the client URLs of all members, stopped ones included,
// indexed like Members.
func (c *EtcdCluster) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// Members returns the embedded members; a stopped member's entry stays in
// place (closed), so indexes never shift.
func (c *EtcdCluster) Members() []*embed.Etcd {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*embed.Etcd(nil), c.members...)
}

// Leader returns the index of the member that the running members currently
// agree is leader, or -1 if there is none or they disagree.
func (c *EtcdCluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	lead, agreed := uint64(0), false
	for i, e := range c.members {
		if c.stopped[i] {
			continue
		}
		l := e.Server.Lead()
		if l == 0 || (agreed && l != lead) {
			return -1
		}
		lead, agreed = l, true
	}
	for i, e := range c.members {
		if !c.stopped[i] && uint64(e.Server.MemberID()) == lead {
			return i
		}
	}
	return -1
}

// StopMember closes member i (waiting for its goroutines); the others keep
// running and, while they have a quorum, elect a new leader if needed. The
// stop is graceful: a leader hands its leadership to a peer first, so a new
// leader is usually in place at once. It takes about a second, the time
// etcd gives its peer connections to drain.
func (c *EtcdCluster) StopMember(i int) {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) || c.stopped[i] {
		c.mu.Unlock()
		return
	}
	c.stopped[i] = true
	e := c.members[i]
	c.mu.Unlock()
	e.Close()
}

// WaitLeader waits until the running members agree on a running leader and
// returns its index, or returns ctx's error.
func (c *EtcdCluster) WaitLeader(ctx context.Context) (int, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if i := c.Leader(); i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("servers: waiting for an etcd leader: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Close stops every running member, waits for their goroutines and removes
// all data directories. It is idempotent and takes about two seconds.
//
// No etcd server, raft, bbolt or gRPC server goroutine outlives Close, but a
// few net/http keep-alive goroutines of the connections between members can
// linger for up to 5s (etcd's peer read timeout) before exiting on their own;
// a single-member Etcd leaves none.
func (c *EtcdCluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	var running []*embed.Etcd
	for i, e := range c.members {
		if !c.stopped[i] {
			c.stopped[i] = true
			running = append(running, e)
		}
	}
	c.mu.Unlock()
	closeMembers(running)
	for _, d := range c.dirs {
		os.RemoveAll(d)
	}
}
