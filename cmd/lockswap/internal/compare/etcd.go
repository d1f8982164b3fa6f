package compare

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/etcdlease"
	"github.com/lockswap/lockswap/internal/servers"
)

// etcdKit is the etcdlease column.
var etcdKit = kit{name: "etcdlease", guarantees: etcdlease.Guarantees(3), setup: setupEtcd}

// The etcd column is declared for a three-member cluster; scenarios that
// do not stop members run on one member, which changes nothing they
// measure.
func setupEtcd(ctx context.Context, e *env, sc string) (*fixture, error) {
	switch sc {
	case ScRestart:
		return nil, fmt.Errorf("%w: etcd persists every write (Raft log and fsync); nothing restarts empty", errNotApplicable)
	case ScFailover:
		return nil, fmt.Errorf("%w: no asynchronous replicas; see %s", errNotApplicable, ScLeaderStop)
	}
	f := &fixture{ttl: time.Second}
	ok := false
	defer func() {
		if !ok {
			f.close()
		}
	}()
	var endpoints []string
	prefix := ""
	switch {
	case len(e.etcdEndpoints) > 0:
		if destructive(sc) {
			return nil, errWouldHarm
		}
		for _, ep := range e.etcdEndpoints {
			if !strings.Contains(ep, "://") {
				ep = "http://" + ep
			}
			endpoints = append(endpoints, ep)
		}
		prefix = e.prefix
	case sc == ScMinorityDown || sc == ScMajorityDown || sc == ScLeaderStop:
		cl, err := servers.StartEtcdCluster(3)
		if err != nil {
			return nil, err
		}
		f.onClose(cl.Close)
		endpoints = cl.Endpoints()
		switch sc {
		case ScMinorityDown:
			f.fault = func(context.Context) error { cl.StopMember((cl.Leader() + 1) % 3); return nil }
			f.note = "1 of 3 members stopped"
		case ScMajorityDown:
			f.fault = func(context.Context) error {
				l := cl.Leader()
				cl.StopMember((l + 1) % 3)
				cl.StopMember((l + 2) % 3)
				return nil
			}
			f.note = "2 of 3 members stopped"
		case ScLeaderStop:
			f.fault = func(ctx context.Context) error {
				old := cl.Leader()
				if old < 0 {
					return fmt.Errorf("no leader")
				}
				cl.StopMember(old)
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				defer cancel()
				_, err := cl.WaitLeader(wctx)
				return err
			}
			f.note = "leader stopped, a new one elected"
		}
	default:
		srv, err := servers.StartEtcd()
		if err != nil {
			return nil, err
		}
		f.onClose(srv.Close)
		endpoints = srv.Endpoints()
	}
	hostPorts := make([]string, len(endpoints))
	for i, ep := range endpoints {
		hostPorts[i] = ep[strings.Index(ep, "://")+3:]
	}
	open := func(eps []string) (lockswap.Locker, error) {
		return etcdlease.Open(etcdlease.Config{Endpoints: eps, DialTimeout: 2 * time.Second,
			RequestTimeout: 2 * time.Second, ClusterSize: 3, Prefix: prefix})
	}
	f.newLocker = func() (lockswap.Locker, error) { return open(endpoints) }
	switch sc {
	case ScPause:
		// The holder reaches etcd through a proxy; the pause cuts it off, so
		// its keepalives stop as they would in a stopped process.
		proxy, err := servers.StartProxy(hostPorts[0])
		if err != nil {
			return nil, err
		}
		f.onClose(proxy.Close)
		first := true
		f.newLocker = func() (lockswap.Locker, error) {
			if first {
				first = false
				return open([]string{proxy.Addr()})
			}
			return open(endpoints)
		}
		f.fault = func(context.Context) error { proxy.Blackhole(true); return nil }
		f.heal = func() { proxy.Blackhole(false) }
	case ScSlow:
		proxy, err := servers.StartProxy(hostPorts[0])
		if err != nil {
			return nil, err
		}
		f.onClose(proxy.Close)
		f.newLocker = func() (lockswap.Locker, error) { return open([]string{proxy.Addr()}) }
		f.fault = func(context.Context) error { proxy.SetDelay(30 * time.Millisecond); return nil }
		f.note = "etcd 30 ms away each way"
	case ScHung:
		// Clients reach etcd through a proxy that can forward nothing.
		// The embedded etcd runs in this process: SIGSTOP would stop
		// compare with it.
		proxy, err := servers.StartProxy(hostPorts[0])
		if err != nil {
			return nil, err
		}
		f.onClose(proxy.Close)
		f.onClose(func() { proxy.Blackhole(false) })
		f.newLocker = func() (lockswap.Locker, error) { return open([]string{proxy.Addr()}) }
		f.hangs = []hang{{name: "no-reply", on: func() error { proxy.Blackhole(true); return nil }, off: func() { proxy.Blackhole(false) }}}
		f.note = "SIGSTOP not measured: the embedded etcd runs in this process (a proxy that never answers is)"
		f.alive = func(ctx context.Context) error {
			lk, err := f.locker(func() (lockswap.Locker, error) { return open(endpoints) })
			if err != nil {
				return err
			}
			l, err := acquireFirst(ctx, lk, "hung-alive", time.Second)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
	}
	ok = true
	return f, nil
}
