package nemesis

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
)

// PauseHolder returns a history.Workload Between hook that, in one
// section out of oneIn (drawn from r), pauses the holder until its lock
// has ended and up to maxExtra more: a GC pause or a stalled VM, the
// holder's own fault. The section's write then comes after its lock.
func PauseHolder(r *Locked, oneIn int, maxExtra time.Duration) func(context.Context, int, lockswap.Lock) {
	return func(ctx context.Context, _ int, l lockswap.Lock) {
		if r.IntN(oneIn) != 0 {
			return
		}
		select {
		case <-l.Done():
		case <-ctx.Done():
			return
		}
		tm := time.NewTimer(time.Duration(r.IntN(int(maxExtra/time.Millisecond)+1)) * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
		}
	}
}

// Save writes ops (history.jsonl) and Porcupine's view of each key res
// found in violation (<key>.html) to dir, which it creates, and returns
// the paths it wrote.
func Save(dir string, ops []history.Op, res history.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := history.WriteJSONL(&buf, ops); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	paths := []string{p}
	for _, k := range res.Violations {
		var v bytes.Buffer
		if err := res.Visualize(k, &v); err != nil {
			return paths, fmt.Errorf("the view of key %q: %w", k, err)
		}
		p := filepath.Join(dir, url.PathEscape(k)+".html")
		if err := os.WriteFile(p, v.Bytes(), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Pausable is a server process the nemesis pauses (SIGSTOP) and resumes
// (internal/servers' Redis and EtcdProcess).
type Pausable interface {
	Pause() error
	Resume()
}

// Restartable is a Pausable that can also restart without its data
// (internal/servers' Redis).
type Restartable interface {
	Pausable
	Restart() error
}

// Proxy is what the nemesis does to a proxy in front of a server
// (internal/servers' Proxy): delay its replies, or hold every byte.
type Proxy interface {
	SetDelay(time.Duration)
	Blackhole(bool)
}

// RedisFaults are the faults of one redis-server, named name ("master 1"),
// that its clients reach through proxy p: paused (SIGSTOP), restarted
// without its data, slowed by 20 ms a reply, cut off.
func RedisFaults(name string, s Restartable, p Proxy) []Fault {
	return append([]Fault{
		{Name: "pause " + name, Inject: func() (func(), error) { return s.Resume, s.Pause() }},
		{Name: "restart " + name + " without its data", Inject: func() (func(), error) { return nil, s.Restart() }},
	}, ProxyFaults(name, p)...)
}

// EtcdFaults are the faults of the etcd process e, named name, that its
// clients reach through proxy p: paused (SIGSTOP: its lease timers stop
// with it, and may expire holders' leases when it continues), slowed by
// 20 ms a reply, cut off.
func EtcdFaults(name string, e Pausable, p Proxy) []Fault {
	return append([]Fault{
		{Name: "pause " + name, Inject: func() (func(), error) { return e.Resume, e.Pause() }},
	}, ProxyFaults(name, p)...)
}

// ProxyFaults are the faults of a server named name that stay on the
// clients' side of proxy p: its replies slowed by 20 ms, or cut off.
func ProxyFaults(name string, p Proxy) []Fault {
	return []Fault{
		{Name: "delay " + name + " by 20 ms", Inject: func() (func(), error) {
			p.SetDelay(20 * time.Millisecond)
			return func() { p.SetDelay(0) }, nil
		}},
		{Name: "cut " + name + " off", Inject: func() (func(), error) {
			p.Blackhole(true)
			return func() { p.Blackhole(false) }, nil
		}},
	}
}

// CutMajority is the fault that cuts off a majority of the servers behind
// ps at once (Redlock's masters, named from 0 as RedisFaults's): the first
// len(ps)/2+1, through their proxies.
func CutMajority(ps []Proxy) Fault {
	m := len(ps)/2 + 1
	return Fault{Name: fmt.Sprintf("cut masters 0-%d off (a majority of %d)", m-1, len(ps)), Inject: func() (func(), error) {
		for _, p := range ps[:m] {
			p.Blackhole(true)
		}
		return func() {
			for _, p := range ps[:m] {
				p.Blackhole(false)
			}
		}, nil
	}}
}
