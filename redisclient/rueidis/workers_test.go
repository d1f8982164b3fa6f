package rueidis_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient/internal/stalltest"
	"github.com/lockswap/lockswap/redisclient/rueidis"
)

// TestWorkers: the adapter of NewNamed, which watches each command under
// a context that can be cancelled itself, sends it from one of the
// adapters' worker goroutines: the next command goes to a worker that
// waits instead of starting a goroutine, and the workers of a burst of 16
// concurrent commands end soon after it.
func TestWorkers(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := rueidis.NewNamed(redistest.RueidisClient(t, srv.Addr()), srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	set := func(key string) {
		if _, err := c.SetNXPX(ctx, key, "v", time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	// A second command reaches the waiting worker.
	stalltest.CheckWorkerReuse(t, "NewNamed", func() { set("first") }, func() { set("second") })

	before, _ := stalltest.Workers()
	stalltest.Burst(set)
	stalltest.WaitWorkers(t, "the burst's workers did not end", func(n, _ int) bool { return n <= len(before) })
}
