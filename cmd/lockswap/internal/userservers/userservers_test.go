package userservers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestKeysPattern: a prefix with glob characters matches only itself.
func TestKeysPattern(t *testing.T) {
	if got := KeysPattern(`a*b?[c]\d:`); got != `*a\*b\?\[c\]\\d:*` {
		t.Errorf("KeysPattern = %q", got)
	}
}

// TestRemoveKeys deletes the keys that hold the prefix, and only them,
// even when the prefix has glob characters.
func TestRemoveKeys(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	const prefix = "run[1]*:"
	for _, k := range []string{prefix + "a", "{" + prefix + "a}:fence", "run1x:a", "user:data"} {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := (Servers{Redis: []string{srv.Addr()}}).RemoveKeys(prefix); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "run1x:a,user:data" && got != "user:data,run1x:a" {
		t.Errorf("left %q, want only the keys without the prefix", keys)
	}
}

// TestCheckRefusedLogin: a server that wants a password fails the check
// with ErrInvalid, a hint on how to give one, and never the password.
func TestCheckRefusedLogin(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.ConfigSet(ctx, "requirepass", "right-one").Err(); err != nil {
		t.Fatal(err)
	}
	err := Servers{Redis: []string{srv.Addr()}, Auth: Auth{Password: "wrong-one", From: "--password"}}.Check(ctx, "history")
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.HasPrefix(err.Error(), "history: ") || !strings.Contains(err.Error(), "came from --password") || strings.Contains(err.Error(), "wrong-one") {
		t.Errorf("Check: %v; want ErrInvalid naming where the password came from, without it", err)
	}
}
