package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestCleanupCommand: a dry run lists the stale legacy key and changes
// nothing; --apply deletes it and nothing else; MIXED units are refused
// (exit 1, nothing deleted); the required flags are usage errors.
func TestCleanupCommand(t *testing.T) {
	srv, c, now, set := keyServer(t)
	ctx := context.Background()
	dead := strconv.FormatInt(now.Add(-2*time.Hour).Unix(), 10)
	live := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	set("lock.dead", dead, 0)
	set("lock.live", live, 0)
	exists := func(key string) bool { return c.Exists(ctx, key).Val() == 1 }

	code, out, errOut := runCLI("cleanup", "--redis", srv.Addr(), "--prefix", "lock.", "--older-than", "1h")
	if code != exitOK || !strings.Contains(out, "lock.dead") || strings.Contains(out, "lock.live") || !strings.Contains(out, "dry run: nothing deleted") {
		t.Errorf("dry run: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if !exists("lock.dead") || !exists("lock.live") {
		t.Error("the dry run deleted a key")
	}

	code, out, errOut = runCLI("cleanup", "--redis", "redis://"+srv.Addr(), "--prefix", "lock.", "--older-than", "1h", "--apply")
	if code != exitOK || !strings.Contains(out, "deleted 1 of 1 stale keys") {
		t.Errorf("--apply: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if exists("lock.dead") || !exists("lock.live") {
		t.Errorf("after --apply: lock.dead exists %v (want deleted), lock.live %v (want kept)", exists("lock.dead"), exists("lock.live"))
	}

	set("lock.dead", dead, 0)
	set("lock.ms", strconv.FormatInt(now.Add(-2*time.Hour).UnixMilli(), 10), 0)
	code, _, errOut = runCLI("cleanup", "--redis", srv.Addr(), "--prefix", "lock.", "--older-than", "1h", "--apply")
	if code != exitError || !strings.Contains(errOut, "MIXED") || !exists("lock.dead") || !exists("lock.ms") {
		t.Errorf("MIXED units: exit %d, stderr %q, keys kept %v %v; want exit 1 naming MIXED, nothing deleted", code, errOut, exists("lock.dead"), exists("lock.ms"))
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prefix", "lock.", "--older-than", "1h"}, "--redis"},
		{[]string{"--redis", srv.Addr(), "--older-than", "1h"}, "--prefix"},
		{[]string{"--redis", srv.Addr(), "--prefix", "lock."}, "--older-than"},
		{[]string{"--redis", srv.Addr(), "--prefix", "lock.", "--older-than", "-1h"}, "--older-than"},
		{[]string{"--redis", srv.Addr(), "--prefix", "lock.", "--older-than", "1h", "--timeout", "0s"}, "--timeout"},
		{[]string{"--redis", srv.Addr(), "--prefix", "", "--older-than", "1h"}, "--all-keys"},
		{[]string{"--redis", srv.Addr(), "--prefix", "lock.", "--all-keys", "--older-than", "1h"}, "--all-keys"},
	} {
		if code, _, errOut := runCLI(append([]string{"cleanup"}, tc.args...)...); code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("cleanup %v: exit %d, stderr %q; want %d naming %s", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}

// keyServer starts a redis-server for a command test and returns it, a
// go-redis client to it, the server's time, and set, which writes a key
// with a Redis expiry of ttl (0: none), failing the test on an error.
func keyServer(t *testing.T) (*testserver.Redis, *redis.Client, time.Time, func(k, v string, ttl time.Duration)) {
	t.Helper()
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redistest.GoRedisClient(t, srv.Addr())
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, now, func(k, v string, ttl time.Duration) {
		t.Helper()
		if err := c.Set(context.Background(), k, v, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
