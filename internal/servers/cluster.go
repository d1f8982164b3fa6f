package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clusterReadyTimeout bounds how long StartRedisCluster, MoveSlot and
// Failover wait for the cluster to agree.
const clusterReadyTimeout = 30 * time.Second

// RedisClusterOptions configures a Redis Cluster started by
// StartRedisCluster.
type RedisClusterOptions struct {
	// Masters is the number of masters; 0 means 3, the fewest Redis
	// Cluster accepts.
	Masters int
	// Replicas is the number of replicas per master (0 or more).
	Replicas int
	// NodeTimeout is cluster-node-timeout; 0 means 5 s. A short one makes
	// a busy machine's nodes suspect each other.
	NodeTimeout time.Duration
}

// RedisCluster is a Redis Cluster of redis-server processes on 127.0.0.1,
// joined by redis-cli --cluster create. Its methods are safe for
// concurrent use.
type RedisCluster struct {
	nodes []*Redis
	mu    sync.Mutex
}

// RedisCLIPath returns the path of redis-cli found on PATH and whether it
// was found.
func RedisCLIPath() (string, bool) {
	p, err := exec.LookPath("redis-cli")
	return p, err == nil
}

// StartRedisCluster starts Masters*(1+Replicas) redis-servers with
// --cluster-enabled yes (no persistence), joins them with redis-cli
// --cluster create, and waits, for at most 30 s, until every node says
// cluster_state:ok with all 16384 slots served, knows every other node, and
// every replica's link to its master is up. Call Stop to kill every node
// and remove their directories.
func StartRedisCluster(opts RedisClusterOptions) (*RedisCluster, error) {
	cli, ok := RedisCLIPath()
	if !ok {
		return nil, errors.New("servers: redis-cli not found on PATH")
	}
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.Masters < 3 || opts.Replicas < 0 {
		return nil, fmt.Errorf("servers: a Redis Cluster needs at least 3 masters and no negative replica count (got %d, %d)", opts.Masters, opts.Replicas)
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = 5 * time.Second
	}
	c := &RedisCluster{}
	n := opts.Masters * (1 + opts.Replicas)
	for i := 0; i < n; i++ {
		r, err := startClusterNode(opts.NodeTimeout)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, r)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(opts.Replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("servers: redis-cli --cluster create: %w\noutput:\n%s", err, out)
	}
	if err := c.WaitReady(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// startClusterNode starts one cluster-enabled redis-server. Its cluster
// bus port is chosen free as well (--cluster-port), retried when taken.
func startClusterNode(nodeTimeout time.Duration) (*Redis, error) {
	var err error
	for i := 0; i < 5; i++ {
		var ports []int
		if ports, err = FreePorts(1); err != nil {
			return nil, err
		}
		var r *Redis
		r, err = StartRedis(RedisOptions{Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", // in the server's own directory
			"--cluster-port", strconv.Itoa(ports[0]),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		}})
		if err == nil {
			return r, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return nil, err
}

// Nodes returns every node, masters and replicas, in start order.
func (c *RedisCluster) Nodes() []*Redis { return append([]*Redis(nil), c.nodes...) }

// Addrs returns every node's "127.0.0.1:port", to seed a cluster client.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, r := range c.nodes {
		addrs[i] = r.Addr()
	}
	return addrs
}

// Node returns the node listening on addr, or nil.
func (c *RedisCluster) Node(addr string) *Redis {
	for _, r := range c.nodes {
		if r.Addr() == addr {
			return r
		}
	}
	return nil
}

// Stop kills every node and removes their directories. It is idempotent.
func (c *RedisCluster) Stop() {
	for _, r := range c.nodes {
		r.Stop()
	}
}

// Do sends one command to the node at addr over a new connection and
// returns its reply: a string, an int64, a []any, nil, or an error for an
// error reply or a failure to talk to the node.
func (c *RedisCluster) Do(addr string, args ...string) (any, error) {
	return redisCommand(addr, 2*time.Second, args...)
}

// KeySlot returns the hash slot of key (CLUSTER KEYSLOT).
func (c *RedisCluster) KeySlot(key string) (int, error) {
	for _, r := range c.nodes {
		if r.Pid() == 0 {
			continue
		}
		v, err := c.Do(r.Addr(), "CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		return int(v.(int64)), nil
	}
	return 0, errors.New("servers: no cluster node is running")
}

// nodeView is one node's own line of CLUSTER NODES.
type nodeView struct {
	addr, id, masterID, flags string
	master, myself            bool
	slots                     [][2]int
}

// self returns the node at addr's view of itself.
func (c *RedisCluster) self(addr string) (nodeView, error) {
	all, err := c.nodesView(addr)
	if err != nil {
		return nodeView{}, err
	}
	for _, nv := range all {
		if nv.myself {
			nv.addr = addr
			return nv, nil
		}
	}
	return nodeView{}, fmt.Errorf("servers: CLUSTER NODES of %s has no myself line", addr)
}

// nodesView returns the node at addr's view of every node it knows
// (CLUSTER NODES).
func (c *RedisCluster) nodesView(addr string) ([]nodeView, error) {
	v, err := c.Do(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	var out []nodeView
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		nv := nodeView{id: f[0], masterID: f[3], flags: f[2], myself: strings.Contains(f[2], "myself"),
			master: strings.Contains(f[2], "master")}
		if a, _, ok := strings.Cut(f[1], "@"); ok {
			nv.addr = a
		}
		for _, rng := range f[8:] {
			if strings.HasPrefix(rng, "[") { // a slot being migrated or imported
				continue
			}
			lo, hi, found := strings.Cut(rng, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("servers: CLUSTER NODES of %s: bad slot range %q", addr, rng)
			}
			nv.slots = append(nv.slots, [2]int{a, b})
		}
		out = append(out, nv)
	}
	return out, nil
}

// agrees reports whether other's view of a node matches the node's own
// view nv: the same role, master and slots, and no failure flag.
func (nv nodeView) agrees(other nodeView) bool {
	return nv.master == other.master && nv.masterID == other.masterID && slices.Equal(nv.slots, other.slots) &&
		!strings.Contains(other.flags, "fail") && !strings.Contains(other.flags, "handshake") &&
		!strings.Contains(other.flags, "noaddr")
}

func (nv nodeView) serves(slot int) bool {
	for _, r := range nv.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// views returns every running node's view of itself.
func (c *RedisCluster) views() ([]nodeView, error) {
	var vs []nodeView
	for _, r := range c.nodes {
		if r.Pid() == 0 {
			continue
		}
		nv, err := c.self(r.Addr())
		if err != nil {
			return nil, err
		}
		vs = append(vs, nv)
	}
	return vs, nil
}

// Masters returns the addresses of the running nodes that say they are
// masters.
func (c *RedisCluster) Masters() ([]string, error) {
	vs, err := c.views()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vs {
		if v.master {
			out = append(out, v.addr)
		}
	}
	return out, nil
}

// MasterOfSlot returns the address of the master that says it serves slot.
func (c *RedisCluster) MasterOfSlot(slot int) (string, error) {
	vs, err := c.views()
	if err != nil {
		return "", err
	}
	for _, v := range vs {
		if v.master && v.serves(slot) {
			return v.addr, nil
		}
	}
	return "", fmt.Errorf("servers: no master says it serves slot %d", slot)
}

// MasterOfKey returns the address of the master that serves key's slot.
func (c *RedisCluster) MasterOfKey(key string) (string, error) {
	slot, err := c.KeySlot(key)
	if err != nil {
		return "", err
	}
	return c.MasterOfSlot(slot)
}

// ReplicaOf returns the address of a running replica of the master at
// addr.
func (c *RedisCluster) ReplicaOf(master string) (string, error) {
	vs, err := c.views()
	if err != nil {
		return "", err
	}
	var id string
	for _, v := range vs {
		if v.addr == master {
			id = v.id
		}
	}
	for _, v := range vs {
		if id != "" && !v.master && v.masterID == id {
			return v.addr, nil
		}
	}
	return "", fmt.Errorf("servers: master %s has no running replica", master)
}

// WaitReady waits, for at most 30 s, until every running node says
// cluster_state:ok with all 16384 slots served, knows as many nodes as
// the cluster has and sees every running node (its role, master and
// slots) as that node sees itself, and every replica's link to its master
// is up.
func (c *RedisCluster) WaitReady() error {
	return waitFor(clusterReadyTimeout, func() error {
		selves, err := c.views()
		if err != nil {
			return err
		}
		byID := map[string]nodeView{}
		for _, nv := range selves {
			byID[nv.id] = nv
		}
		for _, r := range c.nodes {
			if r.Pid() == 0 {
				continue
			}
			all, err := c.nodesView(r.Addr())
			if err != nil {
				return err
			}
			for _, other := range all {
				if own, ok := byID[other.id]; ok && !own.agrees(other) {
					return fmt.Errorf("node %s sees %s as %q replica-of %s slots %v; %[2]s sees itself as master=%v replica-of %s slots %v",
						r.Addr(), own.addr, other.flags, other.masterID, other.slots, own.master, own.masterID, own.slots)
				}
			}
		}
		for _, r := range c.nodes {
			if r.Pid() == 0 {
				continue
			}
			v, err := c.Do(r.Addr(), "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			info := infoFields(v)
			if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" || info["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) {
				return fmt.Errorf("node %s: cluster_state:%s cluster_slots_ok:%s cluster_known_nodes:%s",
					r.Addr(), info["cluster_state"], info["cluster_slots_ok"], info["cluster_known_nodes"])
			}
			v, err = c.Do(r.Addr(), "INFO", "replication")
			if err != nil {
				return err
			}
			repl := infoFields(v)
			if repl["role"] == "slave" && repl["master_link_status"] != "up" {
				return fmt.Errorf("replica %s: master_link_status:%s", r.Addr(), repl["master_link_status"])
			}
		}
		return nil
	})
}

// MoveSlot moves slot, with its keys, to the master at to, as a
// resharding does: CLUSTER SETSLOT IMPORTING on to and MIGRATING on the
// current owner, MIGRATE of the keys in batches, then SETSLOT NODE on to,
// the old owner and the other masters. Clients meet ASK while the keys
// move and MOVED after. It is BeginMove, MigrateKeys and FinishMove in
// one; it returns at once when to already serves slot.
func (c *RedisCluster) MoveSlot(slot int, to string) error {
	m, err := c.BeginMove(slot, to)
	if err != nil || m == nil {
		return err
	}
	if err := m.MigrateKeys(); err != nil {
		return err
	}
	return m.Finish()
}

// SlotMove is a slot migration in progress (see BeginMove).
type SlotMove struct {
	c            *RedisCluster
	slot         int
	from, to     nodeView
	otherMasters []string
}

// BeginMove starts moving slot to the master at to: the owner marks the
// slot MIGRATING and to marks it IMPORTING. Keys still on the owner are
// served there; a key that is not (moved, or new) is answered with ASK,
// and a script over several keys of which only some are present with
// TRYAGAIN. It returns nil and no error when to already serves slot.
func (c *RedisCluster) BeginMove(slot int, to string) (*SlotMove, error) {
	vs, err := c.views()
	if err != nil {
		return nil, err
	}
	m := &SlotMove{c: c, slot: slot}
	for _, v := range vs {
		switch {
		case v.master && v.serves(slot):
			m.from = v
		case v.addr == to:
			m.to = v
		case v.master:
			m.otherMasters = append(m.otherMasters, v.addr)
		}
	}
	if m.from.addr == to {
		return nil, nil
	}
	if m.from.id == "" || m.to.id == "" || !m.to.master {
		return nil, fmt.Errorf("servers: move slot %d to %s: owner %q, destination %q (a master?)", slot, to, m.from.addr, m.to.addr)
	}
	s := strconv.Itoa(slot)
	if _, err := c.Do(m.to.addr, "CLUSTER", "SETSLOT", s, "IMPORTING", m.from.id); err != nil {
		return nil, fmt.Errorf("servers: SETSLOT %d IMPORTING on %s: %w", slot, m.to.addr, err)
	}
	if _, err := c.Do(m.from.addr, "CLUSTER", "SETSLOT", s, "MIGRATING", m.to.id); err != nil {
		return nil, fmt.Errorf("servers: SETSLOT %d MIGRATING on %s: %w", slot, m.from.addr, err)
	}
	return m, nil
}

// From returns the address of the slot's old owner.
func (m *SlotMove) From() string { return m.from.addr }

// MigrateKeys moves every key of the slot from the old owner to the new
// one with MIGRATE, in batches of 100.
func (m *SlotMove) MigrateKeys() error {
	host, port, _ := net.SplitHostPort(m.to.addr)
	for {
		v, err := m.c.Do(m.from.addr, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(m.slot), "100")
		if err != nil {
			return fmt.Errorf("servers: GETKEYSINSLOT %d on %s: %w", m.slot, m.from.addr, err)
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			return nil
		}
		args := []string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}
		for _, k := range keys {
			args = append(args, k.(string))
		}
		if _, err := redisCommand(m.from.addr, 10*time.Second, args...); err != nil {
			return fmt.Errorf("servers: MIGRATE slot %d from %s to %s: %w", m.slot, m.from.addr, m.to.addr, err)
		}
	}
}

// Finish assigns the slot to its new owner (SETSLOT NODE on it, then on
// the old owner and every other master) and waits, for at most 30 s,
// until every master agrees and the cluster is ready.
func (m *SlotMove) Finish() error {
	s := strconv.Itoa(m.slot)
	for _, addr := range append([]string{m.to.addr, m.from.addr}, m.otherMasters...) {
		if _, err := m.c.Do(addr, "CLUSTER", "SETSLOT", s, "NODE", m.to.id); err != nil {
			return fmt.Errorf("servers: SETSLOT %d NODE on %s: %w", m.slot, addr, err)
		}
	}
	return waitFor(clusterReadyTimeout, func() error {
		owner, err := m.c.MasterOfSlot(m.slot)
		if err != nil {
			return err
		}
		if owner != m.to.addr {
			return fmt.Errorf("slot %d still served by %s", m.slot, owner)
		}
		return m.c.WaitReady()
	})
}

// FailoverMode is the mode of CLUSTER FAILOVER (see Failover).
type FailoverMode string

// The CLUSTER FAILOVER modes.
const (
	// FailoverCoordinated: the master stops taking writes until the
	// replica has caught up, then they swap: nothing is lost.
	FailoverCoordinated FailoverMode = ""
	// FailoverForce: the replica does not wait for its master (which may
	// be down), but still needs the votes of a majority of masters.
	FailoverForce FailoverMode = "FORCE"
	// FailoverTakeover: the replica promotes itself without asking anyone.
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// Failover promotes a replica of the master at master with CLUSTER
// FAILOVER in mode, and waits, for at most 30 s, until the replica serves
// the master's slots in every running node's view and the cluster is ready
// (the old master, when running, has become the new one's replica). It
// returns the new master's address.
func (c *RedisCluster) Failover(master string, mode FailoverMode) (string, error) {
	replica, err := c.ReplicaOf(master)
	if err != nil {
		return "", err
	}
	old, err := c.self(master)
	if err != nil && mode == FailoverCoordinated {
		return "", err
	}
	args := []string{"CLUSTER", "FAILOVER"}
	if mode != FailoverCoordinated {
		args = append(args, string(mode))
	}
	if _, err := c.Do(replica, args...); err != nil {
		return "", fmt.Errorf("servers: %s on %s: %w", strings.Join(args, " "), replica, err)
	}
	err = waitFor(clusterReadyTimeout, func() error {
		nv, err := c.self(replica)
		if err != nil {
			return err
		}
		if !nv.master || (len(old.slots) > 0 && !nv.serves(old.slots[0][0])) {
			return fmt.Errorf("replica %s not yet promoted", replica)
		}
		if old.id != "" && c.Node(master).Pid() != 0 {
			ov, err := c.self(master)
			if err != nil {
				return err
			}
			if ov.master {
				return fmt.Errorf("old master %s still a master", master)
			}
		}
		return c.WaitReady()
	})
	if err != nil {
		return "", fmt.Errorf("servers: failover of %s to %s: %w\nreplica log:\n%s\nold master log:\n%s",
			master, replica, err, tail(c.Node(replica).Output(), 15), tail(c.Node(master).Output(), 15))
	}
	return replica, nil
}

// CutReplication stops the master at master from sending writes to its
// replicas: it refuses SYNC and PSYNC to the default user, which replicas
// connect as, and drops its replica connections; it returns once every
// replica of master reports its link down. Writes to the master after
// that reach no replica, as when replication lags behind a crash. It
// cannot be undone; a failover afterwards loses those writes.
func (c *RedisCluster) CutReplication(master string) error {
	replica, err := c.ReplicaOf(master)
	if err != nil {
		return err
	}
	if _, err := c.Do(master, "ACL", "SETUSER", "default", "-psync", "-sync"); err != nil {
		return fmt.Errorf("servers: deny replication on %s: %w", master, err)
	}
	if _, err := c.Do(master, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		return fmt.Errorf("servers: drop replicas of %s: %w", master, err)
	}
	return waitFor(10*time.Second, func() error {
		v, err := c.Do(replica, "INFO", "replication")
		if err != nil {
			return err
		}
		if s := infoFields(v)["master_link_status"]; s != "down" {
			return fmt.Errorf("replica %s: master_link_status:%s", replica, s)
		}
		return nil
	})
}

// waitFor calls check until it returns nil, for at most d; then it returns
// check's last error.
func waitFor(d time.Duration, check func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers: not so after %s: %w", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// infoFields parses an INFO-style reply ("name:value" lines).
func infoFields(v any) map[string]string {
	s, _ := v.(string)
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = val
		}
	}
	return m
}

// redisCommand sends one command over a new connection and reads its
// reply (RESP2), all within timeout.
func redisCommand(addr string, timeout time.Duration, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// errorReply is an error reply of Redis.
type errorReply string

func (e errorReply) Error() string { return "redis: " + string(e) }

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("servers: empty reply line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, errorReply(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			if err != nil {
				var er errorReply
				if !errors.As(err, &er) {
					return nil, err
				}
				v = er
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("servers: unexpected reply %q", line)
}
