package compare

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestMiniredisKeysExpire: on the fallback's miniredis a key expires when
// its TTL has passed on the wall clock, with nobody advancing miniredis's
// clock, as on a real server. A lock key that no one gives back (a
// Redlock instance's late grant) must not stay for good.
func TestMiniredisKeysExpire(t *testing.T) {
	f := &fixture{}
	defer f.close()
	nd, err := startNode(&env{}, f)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: nd.addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "late-grant", "token", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Exists(ctx, "late-grant").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a key with a 50 ms TTL still exists on miniredis after 10 s")
		}
		time.Sleep(10 * time.Millisecond) // poll interval of a bounded wait
	}
}
