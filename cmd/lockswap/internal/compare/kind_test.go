package compare

import (
	"context"
	"strings"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// TestKinds: with Kind permit or write, the scenarios run on permits of
// limit 1 or write holds where the backend has them, and measure what the
// backend declares (a paused holder's stale write rejected by its fence);
// a backend without the kind is not applicable, saying why.
func TestKinds(t *testing.T) {
	for _, kind := range []string{KindPermit, KindWrite} {
		t.Run(kind, func(t *testing.T) {
			res, err := Run(context.Background(), Options{
				Kind:       kind,
				Columns:    []string{"singleredis?fence=true", "etcdlease", "redlock"},
				Scenarios:  []string{ScContention, ScPause},
				Iterations: 3,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Environment, "locks taken: "+kindText(kind)) {
				t.Errorf("environment %q does not say what the locks were", res.Environment)
			}
			for _, row := range res.Rows {
				for col, c := range row.Cells {
					switch {
					case strings.HasPrefix(col, "redlock"):
						if c.Outcome != NotApplicable || !strings.Contains(c.Detail, "the backend has no") {
							t.Errorf("%s on %s: %+v, want n/a saying the backend lacks the kind", row.Scenario, col, c)
						}
					case c.Verdict != AsDeclared:
						t.Errorf("%s on %s: %+v, want as declared", row.Scenario, col, c)
					case row.Scenario == ScPause && c.StaleRejected == 0:
						t.Errorf("%s on %s: %+v, want the stale write rejected by the fence", row.Scenario, col, c)
					}
				}
			}
		})
	}
}

// TestFixtureTakesKind: the Lockers a fixture makes take the kind's hold
// on every call: a permit (it has a slot), a write hold, or the mutex.
func TestFixtureTakesKind(t *testing.T) {
	ctx := context.Background()
	store := memlock.NewStore()
	for _, kind := range append(Kinds(), "") {
		f := &fixture{opt: kindOption(kind)}
		lk, err := f.locker(func() (lockswap.Locker, error) { return memlock.New(store), nil })
		if err != nil {
			t.Fatal(err)
		}
		l, err := lk.TryAcquire(ctx, "k-"+kind)
		if err != nil {
			t.Fatalf("kind %q: %v", kind, err)
		}
		_, permit := lockswap.Slot(l)
		mode := lockswap.ModeOf(l)
		if permit != (kind == KindPermit) || (mode == lockswap.WriteHold) != (kind == KindWrite) || mode == lockswap.ReadHold {
			t.Errorf("kind %q: a permit %v, mode %v", kind, permit, mode)
		}
		l.Release(ctx)
		f.close()
	}
}
