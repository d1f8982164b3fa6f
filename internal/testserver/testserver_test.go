package testserver

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Second, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRedisClusterOfMasters(t *testing.T) {
	rs := RedisClusterOfMasters(t, 3)
	ctx := context.Background()
	seen := map[string]bool{}
	for i, r := range rs {
		if seen[r.Addr()] {
			t.Fatalf("duplicate address %s", r.Addr())
		}
		seen[r.Addr()] = true
		c := newClient(t, r.Addr())
		if err := c.Set(ctx, "k", itoa(i), 0).Err(); err != nil {
			t.Fatalf("SET on %d: %v", i, err)
		}
	}
	for i, r := range rs {
		c := newClient(t, r.Addr())
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != itoa(i) {
			t.Fatalf("server %d GET = %q, %v; want independent data %d", i, got, err, i)
		}
	}
}

func TestMiniredis(t *testing.T) {
	m := Miniredis(t)
	c := newClient(t, m.Addr())
	if err := c.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, _ := m.Get("k"); got != "v" {
		t.Fatalf("miniredis GET = %q, want v", got)
	}
}

// recordTB records Fatal and Skip instead of ending the real test.
type recordTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recordTB) Skip(args ...any) {
	r.skip = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestNeedRedisServerMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, require := range []string{"", "1"} {
		t.Setenv(RequireServersEnv, require)
		rec := &recordTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			NeedRedisServer(rec)
		}()
		<-done
		if require == "1" {
			if !strings.Contains(rec.fatal, "apt-get install -y redis-server") || rec.skip != "" {
				t.Errorf("with %s=1: fatal %q, skip %q; want a fatal with install hint", RequireServersEnv, rec.fatal, rec.skip)
			}
		} else if rec.skip == "" || rec.fatal != "" {
			t.Errorf("without %s: fatal %q, skip %q; want a skip", RequireServersEnv, rec.fatal, rec.skip)
		}
	}
}
