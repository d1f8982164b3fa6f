package inspect_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/inspect"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/singleredis"
)

func TestScan(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			ctx := context.Background()
			now := time.Now().Truncate(time.Second)
			rc := c.New(t, mr.Addr())
			lk, _ := singleredis.New(rc, singleredis.Options{Prefix: "lock:", Fence: true})
			l, err := lk.TryAcquire(ctx, "a", lockswap.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			mr.Set("lock:old-live", strconv.FormatInt(now.Unix()+60, 10))
			mr.Set("lock:old-dead", strconv.FormatInt(now.Unix()-60, 10))
			mr.Set("lock:junk", "hello")
			mr.Set("other:x", "not under the prefix")
			entries, err := inspect.Scan(ctx, rc, "lock:", 0, now)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]inspect.Entry{}
			for _, e := range entries {
				got[e.Key] = e
			}
			if len(got) != 4 {
				t.Fatalf("got %d keys %v, want the 4 under lock:", len(got), got)
			}
			if e := got["lock:a"]; e.Kind != inspect.KindToken || e.Value != l.Token() || e.TTL <= 0 || e.TTL > time.Minute {
				t.Errorf("token lock = %+v", e)
			}
			// Fence counters carry the key in a hash tag: "{lock:a}:fence".
			fences, err := inspect.Scan(ctx, rc, "{lock:", 0, now)
			if err != nil || len(fences) != 1 || fences[0].Key != singleredis.FenceKey("lock:a") || fences[0].Kind != inspect.KindFence || fences[0].Value != "1" {
				t.Errorf("fence counters = %+v, %v", fences, err)
			}
			if e := got["lock:old-live"]; e.Kind != inspect.KindLegacy || e.Expired || e.TTL >= 0 {
				t.Errorf("live legacy lock = %+v", e)
			}
			if e := got["lock:old-dead"]; e.Kind != inspect.KindLegacy || !e.Expired {
				t.Errorf("expired legacy lock = %+v", e)
			}
			if e := got["lock:junk"]; e.Kind != inspect.KindOther {
				t.Errorf("junk = %+v", e)
			}
			var buf bytes.Buffer
			inspect.Print(&buf, entries, now)
			for _, want := range []string{"lock:old-dead", "expired 1m0s ago", "live, 1m0s left", l.Token()} {
				if !strings.Contains(buf.String(), want) {
					t.Errorf("printed table lacks %q:\n%s", want, buf.String())
				}
			}
		})
	}
}
