package migrate_test

import (
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/legacysetnx"
	"github.com/lockswap/lockswap/migrate"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/redigo"
	"github.com/lockswap/lockswap/singleredis"
)

// TestSameKeyByAddress: the same-key refusal goes by the server's address
// and database, not by client library or display name.
func TestSameKeyByAddress(t *testing.T) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	pair := func(legacy, target redisclient.Client) error {
		l, err := legacysetnx.New(legacy, legacysetnx.Options{Prefix: "lock.", Unit: legacysetnx.Seconds})
		if err != nil {
			t.Fatal(err)
		}
		tg, err := singleredis.New(target, singleredis.Options{Prefix: "lock."})
		if err != nil {
			t.Fatal(err)
		}
		_, err = migrate.New(migrate.Options{Phase: migrate.PhaseDual, Legacy: l, Target: tg})
		return err
	}
	// One server through go-redis and through redigo: the same key.
	if err := pair(redistest.GoRedis(t, a.Addr()), redistest.Redigo(t, a.Addr())); !errors.Is(err, migrate.ErrSameKey) {
		t.Errorf("one server, two client libraries: err = %v, want ErrSameKey", err)
	}
	// Two unnamed redigo pools to two servers: not the same key.
	if err := pair(redigo.New(redistest.RedigoPool(t, a.Addr())), redigo.New(redistest.RedigoPool(t, b.Addr()))); err != nil {
		t.Errorf("two unnamed pools to two servers: %v, want accepted", err)
	}
	// Two named redigo pools to two servers: not the same key.
	if err := pair(redistest.Redigo(t, a.Addr()), redistest.Redigo(t, b.Addr())); err != nil {
		t.Errorf("two named pools to two servers: %v, want accepted", err)
	}
}
