package compare

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
)

// redisBackend describes a backend over n Redis servers.
type redisBackend struct {
	name string
	n    int
	g    lockswap.Guarantees
	ttl  time.Duration
	// build makes a Locker over the clients with the key prefix; skew is
	// how far the client's wall clock runs ahead.
	build func(clients []redisclient.Client, skew time.Duration, prefix string, logger *slog.Logger) (lockswap.Locker, error)
	// readsClock: the backend's safety reads the client's wall clock.
	readsClock bool
	// seed, when set, prepares each fresh server (for example marks it as
	// long-running for Redlock's restart safety).
	seed func(ctx context.Context, c redisclient.Client) error
	// serverWideKey names a key outside any prefix that the configuration
	// keeps on every server and that the user's own clients of the same
	// configuration read (Redlock's restart-safety epoch). Such a column
	// is not run on the user's servers: compare never writes that key there.
	serverWideKey string
}

// node is one Redis server of a fixture.
type node struct {
	addr    string
	kill    func()
	restart func() error
	// pause stops the process with SIGSTOP (an error wrapping
	// errors.ErrUnsupported where the OS cannot, such as Windows) and
	// resume continues it; nil for miniredis, which runs in this process.
	pause  func() error
	resume func()
}

func startNode(e *env, f *fixture) (*node, error) {
	if e.real {
		r, err := servers.StartRedis(servers.RedisOptions{})
		if err != nil {
			return nil, err
		}
		f.onClose(r.Stop)
		return &node{addr: r.Addr(), kill: r.Kill, restart: r.Restart, pause: r.Pause, resume: r.Resume}, nil
	}
	mr := miniredis.NewMiniRedis()
	// Keys expire as the wall clock runs, as on a real server. Without
	// this a miniredis key expires only when FastForward says so: a lock
	// that a redlock instance granted after its instance timeout (so it
	// was never given back) stayed for good, and on a loaded machine the
	// contention scenario waited for it until its time budget ran out.
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		return nil, err
	}
	f.onClose(mr.Close)
	return &node{addr: mr.Addr(), kill: mr.Close, restart: func() error { return errNeedsReal }}, nil
}

// newGoRedis returns a client of addr that f closes, logged in as
// f.auth (the user's servers; none for the servers compare starts).
func newGoRedis(f *fixture, addr string) redisclient.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, Username: f.auth.User, Password: f.auth.Password,
		ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	f.onClose(func() { c.Close() })
	if name := f.origin[addr]; name != "" {
		return sameMaster{goredis.New(c), addr, name}
	}
	return goredis.New(c)
}

// sameMaster is a client that reaches one of the masters by another
// address: through a proxy of the scenario's (a network path the scenario
// breaks), or at the replica a failover promoted, as a DNS name that
// follows the failover would. Its Addr is the master's, so that a fenced
// Redlock counts it as the same master as the other clients do
// (redlock.MembersKey).
type sameMaster struct {
	redisclient.Client
	addr, name string
}

func (c sameMaster) Addr() string {
	return strings.Replace(c.Client.Addr(), c.addr, c.name, 1)
}

func (rb redisBackend) kit() kit {
	return kit{name: rb.name, guarantees: rb.g, setup: rb.setup, serverWideKey: rb.serverWideKey}
}

func (rb redisBackend) setup(ctx context.Context, e *env, sc string) (*fixture, error) {
	f := &fixture{ttl: rb.ttl, origin: map[string]string{}}
	ok := false
	defer func() {
		if !ok {
			f.close()
		}
	}()
	needsReal := sc == ScRestart || sc == ScFailover
	if sc == ScLeaderStop {
		return nil, fmt.Errorf("%w: no leader election in Redis", errNotApplicable)
	}
	if len(e.redisAddrs) > 0 {
		return rb.setupUser(e, f, sc, &ok)
	}
	if needsReal && !e.real {
		return nil, errNeedsReal
	}
	nodes := make([]*node, rb.n)
	addrs := make([]string, rb.n)
	for i := range nodes {
		nd, err := startNode(e, f)
		if err != nil {
			return nil, err
		}
		nodes[i], addrs[i] = nd, nd.addr
		if rb.seed != nil {
			if err := rb.seed(ctx, newGoRedis(f, nd.addr)); err != nil {
				return nil, fmt.Errorf("seed %s: %w", nd.addr, err)
			}
		}
	}
	majority := rb.n/2 + 1
	var holderAddrs []string // the first client's addresses, when not addrs
	switch sc {
	case ScRestart:
		f.fault = func(context.Context) error {
			for _, nd := range nodes[:majority] {
				nd.kill()
				if err := nd.restart(); err != nil {
					return err
				}
			}
			return nil
		}
		f.note = fmt.Sprintf("%d of %d restarted empty", majority, rb.n)
	case ScFailover:
		// Node 0 gets a replica that follows it through a proxy; the link
		// is cut before the lock is written (asynchronous replication).
		link, err := servers.StartProxy(addrs[0])
		if err != nil {
			return nil, err
		}
		f.onClose(link.Close)
		replica, err := servers.StartRedis(servers.RedisOptions{ReplicaOf: link.Addr()})
		if err != nil {
			return nil, err
		}
		f.onClose(replica.Stop)
		admin := redis.NewClient(&redis.Options{Addr: replica.Addr()})
		f.onClose(func() { admin.Close() })
		if err := waitLinked(ctx, admin); err != nil {
			return nil, err
		}
		link.Blackhole(true)
		// The holder gets exactly the fewest grants its configuration
		// accepts (a bare majority, plus Failovers): the masters it can
		// do without refuse its connections while it acquires, so the
		// verdict does not depend on how many answered in time.
		refused, heal, err := refuseHolder(f, addrs, rb.g.Tolerates)
		if err != nil {
			return nil, err
		}
		holderAddrs = refused
		// The clients after the failover reach the replica by master 1's
		// name, as a DNS name that follows the failover would.
		f.origin[replica.Addr()] = addrs[0]
		f.fault = func(ctx context.Context) error {
			heal()
			nodes[0].kill()
			return admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err()
		}
		afterAddrs := append([]string{replica.Addr()}, addrs[1:]...)
		f.after = func() (lockswap.Locker, error) { return rb.locker(f, afterAddrs, 0, "") }
		f.note = "the promoted replica never received the lock"
		if rb.n > 1 {
			f.note = fmt.Sprintf("master 1 of %d, one that granted the lock, failed over to a replica that never received it", rb.n)
		}
		if t := rb.g.Tolerates; t > 0 {
			f.note = fmt.Sprintf("%s refused the holder's connections while it acquired (it could get %d of %d grants, the fewest its configuration accepts); then %s",
				mastersList(rb.n-t+1, rb.n), rb.n-t, rb.n, f.note)
		}
	case ScMinorityDown:
		down := (rb.n - 1) / 2
		f.fault = func(context.Context) error {
			for _, nd := range nodes[:down] {
				nd.kill()
			}
			return nil
		}
		f.note = fmt.Sprintf("%d of %d down", down, rb.n)
	case ScMajorityDown:
		f.fault = func(context.Context) error {
			for _, nd := range nodes[:majority] {
				nd.kill()
			}
			return nil
		}
		f.note = fmt.Sprintf("%d of %d down", majority, rb.n)
	case ScSlow:
		proxy, err := servers.StartProxy(addrs[0])
		if err != nil {
			return nil, err
		}
		f.onClose(proxy.Close)
		addrs[0] = proxy.Addr()
		f.fault = func(context.Context) error { proxy.SetDelay(30 * time.Millisecond); return nil }
		f.note = fmt.Sprintf("server 1 of %d delayed 30 ms each way", rb.n)
	case ScHung:
		if err := rb.hangs(f, nodes, addrs); err != nil {
			return nil, err
		}
	}
	f.newLocker = func() (lockswap.Locker, error) { return rb.locker(f, addrs, 0, "") }
	if holderAddrs != nil {
		f.newLocker = func() (lockswap.Locker, error) { return rb.locker(f, holderAddrs, 0, "") }
	}
	if rb.readsClock {
		f.newSkewed = func(skew time.Duration) (lockswap.Locker, error) { return rb.locker(f, addrs, skew, "") }
	}
	ok = true
	return f, nil
}

// mastersList names masters from to to (1-based): "master 5", "masters
// 4 and 5", "masters 3, 4 and 5".
func mastersList(from, to int) string {
	if from == to {
		return fmt.Sprintf("master %d", from)
	}
	var b strings.Builder
	b.WriteString("masters ")
	for i := from; i < to; i++ {
		if i > from {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, i)
	}
	fmt.Fprintf(&b, " and %d", to)
	return b.String()
}

// refuseHolder puts a proxy that refuses every connection (servers.Proxy
// Partition) in front of the last k of addrs, and returns the addresses
// the holder uses (the others direct) and the function that lets the
// connections through again (the network heals; nothing the holder sent
// reached those servers).
func refuseHolder(f *fixture, addrs []string, k int) ([]string, func(), error) {
	out := append([]string(nil), addrs...)
	var proxies []*servers.Proxy
	for i := len(addrs) - k; i < len(addrs); i++ {
		p, err := servers.StartProxy(addrs[i])
		if err != nil {
			return nil, nil, err
		}
		f.onClose(p.Close)
		p.Partition(true)
		proxies = append(proxies, p)
		out[i] = p.Addr()
		f.origin[out[i]] = addrs[i]
	}
	return out, func() {
		for _, p := range proxies {
			p.Partition(false)
		}
	}, nil
}

// setupUser sets the backend up on the user's own servers, for the
// scenarios that do not harm them. Its keys go under the run's prefix and
// the backend's name, and are deleted when the fixture closes.
func (rb redisBackend) setupUser(e *env, f *fixture, sc string, ok *bool) (*fixture, error) {
	if destructive(sc) {
		return nil, errWouldHarm
	}
	if rb.n > 1 {
		if n := len(e.redisAddrs); n < 3 || n%2 == 0 {
			return nil, fmt.Errorf("%w: %s needs an odd number of at least 3 --redis addresses, got %d", errNotApplicable, rb.name, n)
		}
	}
	if rb.serverWideKey != "" {
		return nil, fmt.Errorf("%w: this configuration keeps the server-wide key %q, which your own clients of it read; compare does not write it on your servers",
			errUserServers, rb.serverWideKey)
	}
	// A copy: the scenario may put a proxy in front of a server, and the
	// next backend must still find the user's address (it used to find
	// the closed proxy of the one before).
	n := 1
	if rb.n > 1 {
		n = len(e.redisAddrs)
	}
	addrs := append([]string(nil), e.redisAddrs[:n]...)
	prefix := e.prefix + rb.name + ":"
	f.auth = e.redisAuth
	// Registered first, so run last: after the Lockers have closed.
	f.onClose(func() { cleanUserServers(e) })
	if sc == ScSlow {
		proxy, err := servers.StartProxy(addrs[0])
		if err != nil {
			return nil, err
		}
		f.onClose(proxy.Close)
		addrs[0] = proxy.Addr()
		f.fault = func(context.Context) error { proxy.SetDelay(30 * time.Millisecond); return nil }
		f.note = "a local proxy adds 30 ms each way to server 1"
	}
	f.newLocker = func() (lockswap.Locker, error) { return rb.locker(f, addrs, 0, prefix) }
	if rb.readsClock {
		f.newSkewed = func(skew time.Duration) (lockswap.Locker, error) { return rb.locker(f, addrs, skew, prefix) }
	}
	*ok = true
	return f, nil
}

// hangs sets up the hung-server scenario: a proxy in front of every
// server (clients go through them) that can forward nothing, and SIGSTOP
// of the real server processes. The servers are made to answer again when
// the fixture closes, whatever happened before.
func (rb redisBackend) hangs(f *fixture, nodes []*node, addrs []string) error {
	direct := append([]string(nil), addrs...)
	proxies := make([]*servers.Proxy, len(addrs))
	for i := range addrs {
		p, err := servers.StartProxy(addrs[i])
		if err != nil {
			return err
		}
		f.onClose(p.Close)
		proxies[i], addrs[i] = p, p.Addr()
	}
	blackhole := func(on bool) {
		for _, p := range proxies {
			p.Blackhole(on)
		}
	}
	heal := func() { blackhole(false) }
	f.onClose(heal)
	f.hangs = []hang{{name: "no-reply", on: func() error { blackhole(true); return nil }, off: heal}}
	if nodes[0].pause != nil {
		resume := func() {
			for _, nd := range nodes {
				nd.resume()
			}
		}
		f.onClose(resume)
		f.hangs = append(f.hangs, hang{name: "SIGSTOP", off: resume, on: func() error {
			for _, nd := range nodes {
				if err := nd.pause(); err != nil {
					return err
				}
			}
			return nil
		}})
	} else {
		f.note = "SIGSTOP not measured: miniredis runs in this process (a proxy that never answers is)"
	}
	f.alive = func(ctx context.Context) error {
		for _, a := range direct {
			if _, err := newGoRedis(f, a).Do(ctx, "PING"); err != nil {
				return fmt.Errorf("%s: %w", a, err)
			}
		}
		return nil
	}
	return nil
}

func (rb redisBackend) locker(f *fixture, addrs []string, skew time.Duration, prefix string) (lockswap.Locker, error) {
	clients := make([]redisclient.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = newGoRedis(f, a)
	}
	return rb.build(clients, skew, prefix, f.logger)
}

func waitLinked(ctx context.Context, admin *redis.Client) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := admin.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica never linked to its primary")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
