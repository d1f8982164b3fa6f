package etcdlease

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/registry"
)

// TestSubSecondTTLRefused: etcd leases are whole seconds, so a TTL below
// MinTTL (1 s) is refused with ErrInvalid wherever it is given (ttl= in
// the URL, Config.TTL, WithTTL, Extend) and changes nothing; it used to be
// accepted and run on a lease of a second or more, outliving the TTL
// asked for when the holder crashed. 1 s and 1.5 s are taken.
func TestSubSecondTTLRefused(t *testing.T) {
	if min, max := ttlRange(); min != time.Second || max != lockswap.MaxTTL {
		t.Errorf("TTL range [%v, %v], want [1s, %v]", min, max, lockswap.MaxTTL)
	}
	for _, raw := range []string{"etcd://h:2379?ttl=500ms", "etcd://h:2379?ttl=999ms", "etcdlease://h:2379?ttl=10ms"} {
		_, err := registry.ParseURL(raw)
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "ttl=") || !strings.Contains(err.Error(), "whole seconds") {
			t.Errorf("ParseURL(%q): %v, want ErrInvalid naming ttl= and why", raw, err)
		}
	}
	if _, err := registry.ParseURL("etcd://h:2379?ttl=1s"); err != nil {
		t.Errorf("ttl=1s: %v", err)
	}
	srv := testserver.EtcdT(t)
	if lk, err := Open(Config{Endpoints: srv.Endpoints(), TTL: 500 * time.Millisecond}); !errors.Is(err, lockswap.ErrInvalid) {
		if err == nil {
			lk.Close()
		}
		t.Errorf("Open with Config.TTL 500ms: %v, want ErrInvalid", err)
	}
	ctx := ctxT(t, 30*time.Second)
	a, b := openT(t, srv.Endpoints(), "minttl/"), openT(t, srv.Endpoints(), "minttl/")
	if min, _ := a.TTLRange(); min != time.Second {
		t.Errorf("TTLRange() min %v, want 1s", min)
	}
	for _, ttl := range []time.Duration{300 * time.Millisecond, time.Second - time.Millisecond} {
		if l, err := a.TryAcquire(ctx, "k", lockswap.WithTTL(ttl)); !errors.Is(err, lockswap.ErrInvalid) {
			if err == nil {
				l.Release(ctx)
			}
			t.Errorf("TryAcquire with ttl %v: %v, want ErrInvalid", ttl, err)
		}
		if l, err := a.Acquire(ctx, "k", lockswap.WithTTL(ttl)); !errors.Is(err, lockswap.ErrInvalid) {
			if err == nil {
				l.Release(ctx)
			}
			t.Errorf("Acquire with ttl %v: %v, want ErrInvalid", ttl, err)
		}
	}
	l, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatalf("TryAcquire with ttl 1.5s after the refused calls: %v", err)
	}
	if err := l.Extend(ctx, 500*time.Millisecond); !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("Extend by 500ms: %v, want ErrInvalid", err)
	}
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Errorf("Extend by 1s: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}
