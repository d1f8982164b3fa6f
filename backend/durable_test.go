package backend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestRequireDurable: require=durable opens a fenced or restart-safe
// Locker only when no server's settings let a crash bring a counter or
// epoch back older or let memory pressure evict it: it refuses, naming the
// server and the setting to change, a server with RDB snapshots alone or
// appendfsync everysec, and Lockers that keep no counters; it accepts
// persistence off or appendfsync always, and a server whose settings it
// cannot read (CONFIG renamed away, as managed services do), on every
// client.
func TestRequireDurable(t *testing.T) {
	ctx := context.Background()
	off := testserver.RedisT(t, testserver.RedisOptions{}).Addr()
	fsynced := testserver.RedisT(t, testserver.RedisOptions{Persistence: true}).Addr()
	snapshots := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--save", "60 1"}}).Addr()
	everysec := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--appendonly", "yes", "--appendfsync", "everysec"}}).Addr()
	noConfig := testserver.RedisT(t, testserver.RedisOptions{Args: []string{"--rename-command", "CONFIG", ""}}).Addr()
	for _, client := range []string{"goredis", "redigo", "rueidis"} {
		for _, c := range []struct {
			url  string
			want []string // words of the refusal; none: opens
		}{
			{"singleredis://" + off + "?fence=true", nil},
			{"singleredis://" + fsynced + "?fence=true", nil},
			{"singleredis://" + noConfig + "?fence=true", nil},
			{"singleredis://" + snapshots + "?fence=true", []string{snapshots, "RDB snapshots", "appendfsync always"}},
			{"singleredis://" + off, []string{"fence=true"}},
			{fmt.Sprintf("redlock://%s,%s,%s?fence=true", off, fsynced, noConfig), nil},
			{fmt.Sprintf("redlock://%s,%s,%s?restart_safety=true&max_ttl=1m", off, everysec, fsynced), []string{everysec, "appendfsync everysec"}},
			{fmt.Sprintf("redlock://%s,%s,%s", off, fsynced, noConfig), []string{"restart_safety=true"}},
			{"legacysetnx://" + off + "?unit=s", []string{"legacysetnx", "applies to redlock"}},
		} {
			url := c.url + sep(c.url) + "require=durable&client=" + client
			lk, err := backend.OpenURL(ctx, url)
			if c.want == nil {
				if err != nil {
					t.Errorf("%s: %v, want it open", url, err)
				} else {
					lk.Close()
				}
				continue
			}
			if err == nil {
				lk.Close()
				t.Errorf("%s opened, want ErrInvalid naming %q", url, c.want)
				continue
			}
			if !errors.Is(err, lockswap.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", url, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v, want %q in it", url, err, w)
				}
			}
		}
	}
}

// sep is what joins another parameter to url.
func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}
