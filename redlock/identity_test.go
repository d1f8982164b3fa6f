package redlock_test

import (
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/redigo"
	"github.com/lockswap/lockswap/redlock"
)

// TestInstancesByAddress: redlock's duplicate check goes by the server's
// address and database: one master through go-redis and redigo is refused,
// pools to different masters, named or not, are accepted.
func TestInstancesByAddress(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, miniredis.RunT(t).Addr())
	}
	lk, err := redlock.New([]redisclient.Client{
		redigo.New(redistest.RedigoPool(t, addrs[0])), redigo.New(redistest.RedigoPool(t, addrs[1])), redistest.Redigo(t, addrs[2]),
	}, redlock.Options{})
	if err != nil {
		t.Fatalf("three pools to three masters: %v", err)
	}
	lk.Close()
	_, err = redlock.New([]redisclient.Client{
		redistest.GoRedis(t, addrs[0]), redistest.Redigo(t, addrs[1]), redistest.Redigo(t, addrs[0]),
	}, redlock.Options{})
	if !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("one master through go-redis and redigo: err = %v, want ErrInvalid", err)
	}
}
