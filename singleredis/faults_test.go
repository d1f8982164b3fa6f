package singleredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/singleredis"
)

// TestFaults runs the promise matrix: every call keeps its bound, and its
// error has the right class, when Redis stops answering, is paused,
// answers late, refuses or resets connections, or speaks plain text to
// TLS, on every client (go-redis with its default options too, which
// ignores contexts by itself), whatever the context: plain, fenced and
// with fair_wait.
func TestFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  singleredis.Options
		query string
		// closeBound: docs/errors.md's Close row (fair_wait on rueidis:
		// a second more, rueidis's goodbye on the subscription's
		// connection).
		closeBound map[string]time.Duration
	}{
		{"plain", singleredis.Options{}, "", nil},
		{"fenced", singleredis.Options{Fence: true}, "?fence=true", nil},
		{"fair_wait", singleredis.Options{FairWait: true}, "?fair_wait=true", map[string]time.Duration{"rueidis": 2 * time.Second}},
		// Permits of a counting semaphore (limit 1: conformance.OnePermit),
		// fenced: one script per operation.
		{"permits", singleredis.Options{Fence: true}, "?fence=true", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			redistest.RunMatrix(t, redistest.Backend{N: 1, TTL: 500 * time.Millisecond,
				NewLocker: func(t *testing.T, clients []redisclient.Client) lockswap.Locker {
					lk, err := singleredis.New(clients[0], c.opts)
					if err != nil {
						t.Fatal(err)
					}
					if c.name == "permits" {
						return conformance.OnePermit(lk)
					}
					return lk
				},
				URL:        func(hosts []string) string { return "singleredis://" + hosts[0] + c.query },
				CloseBound: c.closeBound,
			})
		})
	}
}

// TestDefaultWaitEnds: with context.Background() and default options, an
// Acquire against a Redis that refuses connections returns an error
// matching ErrUnavailable after lockswap.DefaultMaxOutage, not never.
func TestDefaultWaitEnds(t *testing.T) {
	t.Parallel()
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0]) // nothing listens there
	lk, err := singleredis.New(redistest.GoRedis(t, addr), singleredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	begin := time.Now()
	l, err := lk.Acquire(context.Background(), "default-wait")
	d := time.Since(begin)
	if l != nil || !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("Acquire = (%v, %v), want no lock and ErrUnavailable", l, err)
	}
	if d < lockswap.DefaultMaxOutage || d > lockswap.DefaultMaxOutage+5*time.Second {
		t.Fatalf("Acquire gave up after %v, want about DefaultMaxOutage (%v)", d.Round(time.Millisecond), lockswap.DefaultMaxOutage)
	}
	t.Logf("gave up after %v: %v", d.Round(time.Millisecond), err)
}

// TestPermanentErrorsFailAtOnce: an error that retrying cannot fix (here a
// password the server wants and the client does not give) ends Acquire at
// once, even with a context that never ends, with ErrInvalid and a message
// that says what to fix; it is not retried as an outage.
func TestPermanentErrorsFailAtOnce(t *testing.T) {
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			srv := testserver.RedisT(t, testserver.RedisOptions{})
			// The password first: a connection made before keeps working
			// without it (rueidis connects when the client is made).
			raw := redistest.GoRedisClient(t, srv.Addr())
			if err := raw.ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
				t.Fatal(err)
			}
			lk, err := singleredis.New(c.New(t, srv.Addr()), singleredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			begin := time.Now()
			_, err = lk.Acquire(context.Background(), "auth")
			if !errors.Is(err, lockswap.ErrInvalid) || errors.Is(err, lockswap.ErrUnavailable) {
				t.Fatalf("Acquire without the password: err = %v, want ErrInvalid (not retried as an outage)", err)
			}
			if !strings.Contains(err.Error(), "password") {
				t.Errorf("error %q does not say what to fix (the password)", err)
			}
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("Acquire took %v to fail, want at once", d.Round(time.Millisecond))
			}
		})
	}
}

// TestReadOnlyReplicaIsAnOutage: a fenced acquire sent to a read-only
// replica (a Sentinel failover in progress, a client pointed at the wrong
// node) fails inside its script with READONLY: that is an outage to wait
// out (ErrUnavailable), not bad input.
func TestReadOnlyReplicaIsAnOutage(t *testing.T) {
	primary := testserver.RedisT(t, testserver.RedisOptions{})
	replica := testserver.RedisT(t, testserver.RedisOptions{ReplicaOf: primary.Addr()})
	for _, c := range redistest.Clients {
		t.Run(c.Name, func(t *testing.T) {
			for _, fence := range []bool{false, true} {
				lk, err := singleredis.New(c.New(t, replica.Addr()), singleredis.Options{Fence: fence})
				if err != nil {
					t.Fatal(err)
				}
				_, err = lk.TryAcquire(context.Background(), "readonly")
				if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrInvalid) {
					t.Errorf("fence=%v: TryAcquire on a read-only replica: err = %v, want ErrUnavailable (not ErrInvalid)", fence, err)
				}
				lk.Close()
			}
		})
	}
}
