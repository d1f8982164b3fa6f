package singleredis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/singleredis"
)

// TestReadWriteConformance runs the read-write suite for singleredis on
// redis-server (the holds' expiries are in the server's clock, which
// miniredis's time travel does not move): go-redis plain, fenced and with
// fair wait, and the other clients fenced.
func TestReadWriteConformance(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for i, c := range redistest.Clients {
		opts := []singleredis.Options{{Prefix: "fenced:", Fence: true}}
		if i == 0 {
			opts = append(opts, singleredis.Options{Prefix: "plain:"}, singleredis.Options{Prefix: "fair:", Fence: true, FairWait: true})
		}
		for _, o := range opts {
			t.Run(fmt.Sprintf("%s/fence=%v/fair=%v", c.Name, o.Fence, o.FairWait), func(t *testing.T) {
				conformance.RunReadWrite(t, harnessOpts(srv.Addr(), c.New, o, 300*time.Millisecond, nil))
			})
		}
	}
}
