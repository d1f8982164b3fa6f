package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	goredisadapter "github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redlock"
	goredis "github.com/redis/go-redis/v9"
)

// fencedOver is a fenced Locker over addrs with prefix "m:" (go-redis,
// the adaptive timeout), closed when the test ends.
func fencedOver(t *testing.T, addrs []string) *redlock.Locker {
	t.Helper()
	return newLocker(t, addrs, redistest.GoRedis, redlock.Options{Prefix: "m:", Fence: true, InstanceTimeout: adaptiveTimeout})
}

// registrations returns the fields of redlock.MembersKey on the server at
// addr.
func registrations(t *testing.T, addr string) map[string]string {
	t.Helper()
	m, err := redistest.GoRedisClient(t, addr).HGetAll(context.Background(), redlock.MembersKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMembersRefuseSetsTwoApart: a fenced Locker whose masters differ by
// two from the set another client registered under the same prefix is
// refused with ErrInvalid that names both sets and what to do, before it
// writes anything: the two masters only it uses stay empty. Two sets of
// different prefixes, and two sets one master apart, are both admitted.
func TestMembersRefuseSetsTwoApart(t *testing.T) {
	redlock.SetFenceCounterTTL(t, 10*time.Second)
	addrs, _ := realN(t, 5)
	ctx := ctxT(t)
	old := fencedOver(t, addrs[:3])
	f1 := fencedCycle(t, old, "k")

	wide := fencedOver(t, addrs)
	_, err := wide.TryAcquire(ctx, "k")
	if !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("a Locker over 5 masters, 3 of them registered as a set under its prefix: %v, want ErrInvalid", err)
	}
	for _, want := range []string{"the masters differ", "one master at a time", "Changing the masters", addrs[0], addrs[4]} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	for _, a := range addrs[3:] {
		if n := redistest.GoRedisClient(t, a).DBSize(ctx).Val(); n != 0 {
			t.Errorf("the refused Locker left %d keys on %s, a master only it uses", n, a)
		}
	}
	for _, a := range addrs[:3] {
		if r := registrations(t, a); len(r) != 1 {
			t.Errorf("%s holds %d registrations after the refusal, want the old set's alone: %v", a, len(r), r)
		}
	}
	// The old set goes on, its fences increasing.
	if f2 := fencedCycle(t, old, "k"); f2 <= f1 {
		t.Fatalf("the old set's fence went from %d to %d", f1, f2)
	}
	// Another prefix is another set of keys: admitted.
	other := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Prefix: "other:", Fence: true, InstanceTimeout: adaptiveTimeout})
	fencedCycle(t, other, "k")
	// One master apart: admitted, and its fence follows the old set's.
	four := fencedOver(t, addrs[:4])
	f3 := fencedCycle(t, old, "k")
	if f4 := fencedCycle(t, four, "k"); f4 <= f3 {
		t.Fatalf("the set one master larger got fence %d after the old set's %d", f4, f3)
	}
}

// TestMembersChangeOneAtATime follows docs/redlock.md, "Changing the
// masters", from 3 masters to 5 with clients running all along: each step
// adds one master to the clients one by one; the next step waits until no
// master holds a registration of the set two steps back. Two clients take
// the same key in turn throughout: each fence is above the one before,
// and while one holds the key the other is refused with ErrHeld.
func TestMembersChangeOneAtATime(t *testing.T) {
	const life = 2 * time.Second
	redlock.SetFenceCounterTTL(t, life)
	addrs, _ := realN(t, 5)
	ctx := ctxT(t)
	var last uint64
	turn := func(holder, other *redlock.Locker, step string) {
		t.Helper()
		l, err := holder.TryAcquire(ctx, "k", lockswap.WithTTL(5*time.Second))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if _, err := other.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("%s: the other client while the key is held: %v, want ErrHeld", step, err)
		}
		if f := fenceOf(t, l); f <= last {
			t.Fatalf("%s: fence %d after %d", step, f, last)
		} else {
			last = f
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	a, b := fencedOver(t, addrs[:3]), fencedOver(t, addrs[:3])
	for range 3 {
		turn(a, b, "3 masters")
		turn(b, a, "3 masters")
	}
	for _, n := range []int{4, 5} {
		// Wait until no master holds a registration of the set two steps
		// back: `redis-cli HGETALL lockswap:redlock:members` on each.
		waitFor(t, "the registrations of the set two steps back end", func() bool {
			for _, addr := range addrs {
				for f := range registrations(t, addr) {
					if ids, _, _ := strings.Cut(f, " "); strings.Count(ids, ",")+1 <= n-2 {
						return false
					}
				}
			}
			return true
		})
		// One client at a time moves to the new set; the other still runs
		// the old one and they take turns.
		a.Close()
		a = fencedOver(t, addrs[:n])
		for range 3 {
			turn(a, b, "mixed")
			turn(b, a, "mixed")
		}
		if n == 4 {
			// Skipping a step is refused while the old set is registered.
			skip := fencedOver(t, addrs)
			if _, err := skip.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrInvalid) {
				t.Fatalf("a client of 5 masters while one of 3 runs: %v, want ErrInvalid", err)
			}
		}
		b.Close()
		b = fencedOver(t, addrs[:n])
		for range 3 {
			turn(a, b, "new set")
			turn(b, a, "new set")
		}
	}
}

// TestMembersBadKey: MembersKey holding another Redis type on a master
// makes fenced acquisitions fail with ErrInvalid that names the key, and
// changes nothing.
func TestMembersBadKey(t *testing.T) {
	addrs, _ := realN(t, 3)
	ctx := ctxT(t)
	raw := redistest.GoRedisClient(t, addrs[1])
	if err := raw.Set(ctx, redlock.MembersKey, "theirs", 0).Err(); err != nil {
		t.Fatal(err)
	}
	lk := fencedOver(t, addrs)
	_, err := lk.TryAcquire(ctx, "k")
	if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), redlock.MembersKey) {
		t.Fatalf("with %s holding a string: %v, want ErrInvalid naming the key", redlock.MembersKey, err)
	}
	if v := raw.Get(ctx, redlock.MembersKey).Val(); v != "theirs" {
		t.Fatalf("the key now holds %q", v)
	}
	for _, a := range addrs {
		if n := redistest.GoRedisClient(t, a).Exists(ctx, "m:k", redlock.FenceKey("m:k")).Val(); n != 0 {
			t.Fatalf("%s holds the lock or its counter after the refusal", a)
		}
	}
}

// noAddr hides the address of the client it wraps, as a redigo pool given
// none does.
type noAddr struct{ redisclient.Client }

func (noAddr) Addr() string { return "" }

// TestMembersUnknownAddrs: a fenced Locker whose clients do not say their
// address registers nothing, says so once at New (MsgMembersUnchecked),
// and acquires.
func TestMembersUnknownAddrs(t *testing.T) {
	addrs, _ := realN(t, 3)
	var logs bytes.Buffer
	cs := make([]redisclient.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = noAddr{redistest.GoRedis(t, a)}
	}
	lk, err := redlock.New(cs, redlock.Options{Fence: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	fencedCycle(t, lk, "k")
	if n := strings.Count(logs.String(), redlock.MsgMembersUnchecked); n != 1 {
		t.Fatalf("%d records %q, want 1:\n%s", n, redlock.MsgMembersUnchecked, logs.String())
	}
	for _, a := range addrs {
		if r := registrations(t, a); len(r) != 0 {
			t.Fatalf("%s holds registrations: %v", a, r)
		}
	}
}

// TestMembersDenied: masters whose ACL refuses the membership script's
// commands leave the Locker unchecked: it acquires, and says so once
// (MsgMembersUnchecked, naming the masters and the rights to add), however
// many acquisitions follow.
func TestMembersDenied(t *testing.T) {
	addrs, _ := realN(t, 3)
	ctx := ctxT(t)
	var logs bytes.Buffer
	cs := make([]redisclient.Client, len(addrs))
	for i, a := range addrs {
		if err := redistest.GoRedisClient(t, a).Do(ctx, "ACL", "SETUSER", "nohash", "on", ">pw", "~*", "+@all", "-hgetall").Err(); err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(&goredis.Options{Addr: a, Username: "nohash", Password: "pw"})
		t.Cleanup(func() { c.Close() })
		cs[i] = goredisadapter.New(c)
	}
	lk, err := redlock.New(cs, redlock.Options{Fence: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	for range 3 {
		fencedCycle(t, lk, "k")
	}
	if n := strings.Count(logs.String(), redlock.MsgMembersUnchecked); n != 1 || !strings.Contains(logs.String(), "+hgetall") {
		t.Fatalf("%d records %q, want 1 naming the rights to add:\n%s", n, redlock.MsgMembersUnchecked, logs.String())
	}
}

// TestMembersRefusedLeavesNone: a set registered on a shared master
// between a round's check and its registration (the race of two clients
// starting at once) makes the registration refuse there; the Locker then
// removes what it wrote on the other masters, so that nothing of a refused
// set is left to refuse others.
func TestMembersRefusedLeavesNone(t *testing.T) {
	redlock.SetFenceCounterTTL(t, 10*time.Second)
	addrs, _ := realN(t, 5)
	ctx := ctxT(t)
	registerBetweenPasses(t, addrs)()
	late := fencedOver(t, addrs[2:])
	if _, err := late.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("a Locker whose registration met another set's: %v, want ErrInvalid", err)
	}
	for _, a := range addrs[3:] {
		if r := registrations(t, a); len(r) != 0 {
			t.Errorf("%s, a master only the refused Locker uses, holds %v", a, r)
		}
	}
}

// TestMembersRefreshedWhileOpen: a Locker's registration is refreshed while
// it is open, whether or not it acquires (a holder that only extends), so a
// set two masters away stays refused after the first registration's end.
func TestMembersRefreshedWhileOpen(t *testing.T) {
	const life = time.Second
	redlock.SetFenceCounterTTL(t, life)
	addrs, _ := realN(t, 5)
	ctx := ctxT(t)
	old := fencedOver(t, addrs[:3])
	redlock.RegisterMembers(t, old)
	first := registrations(t, addrs[0])
	// Wait past the first registration's end without acquiring.
	end := time.Now().Add(life)
	waitFor(t, "the registration refreshed past its first end", func() bool {
		r := registrations(t, addrs[0])
		return time.Now().After(end) && len(r) == 1 && !maps.Equal(r, first)
	})
	wide := fencedOver(t, addrs)
	if _, err := wide.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("a set two masters away from an open Locker's, after its first registration's end: %v, want ErrInvalid", err)
	}
}

// TestMembersHungMaster: a master that never answers does not keep the
// others from registering, nor the Locker from acquiring.
func TestMembersHungMaster(t *testing.T) {
	addrs, _ := realN(t, 3)
	proxy := testserver.ProxyT(t, addrs[2])
	proxy.Blackhole(true)
	defer proxy.Blackhole(false)
	lk := fencedOver(t, []string{addrs[0], addrs[1], proxy.Addr()})
	redlock.RegisterMembers(t, lk)
	for _, a := range addrs[:2] {
		if r := registrations(t, a); len(r) != 1 {
			t.Fatalf("%s holds %v, want the Locker's registration", a, r)
		}
	}
	fencedCycle(t, lk, "k")
}

// TestMembersNames: clients that reach the same masters by different
// addresses are one set when they name the masters alike
// (Options.MasterNames); names that do not name each master once are
// refused at New.
func TestMembersNames(t *testing.T) {
	redlock.SetFenceCounterTTL(t, 10*time.Second)
	addrs, _ := realN(t, 3)
	names := []string{"a", "b", "c"}
	via := make([]string, len(addrs))
	for i, a := range addrs {
		via[i] = testserver.ProxyT(t, a).Addr()
	}
	direct := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Prefix: "m:", Fence: true, MasterNames: names, InstanceTimeout: adaptiveTimeout})
	proxied := newLocker(t, via, redistest.GoRedis, redlock.Options{Prefix: "m:", Fence: true, MasterNames: names, InstanceTimeout: adaptiveTimeout})
	f1 := fencedCycle(t, direct, "k")
	if f2 := fencedCycle(t, proxied, "k"); f2 <= f1 {
		t.Fatalf("fence %d after %d", f2, f1)
	}
	for _, bad := range [][]string{{"a", "b"}, {"a", "", "c"}, {"a", "b", "a"}} {
		cs := make([]redisclient.Client, len(addrs))
		for i, a := range addrs {
			cs[i] = redistest.GoRedis(t, a)
		}
		if _, err := redlock.New(cs, redlock.Options{Fence: true, MasterNames: bad}); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("MasterNames %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestMembersConflictRemembered: a Locker that found a conflict on a
// master keeps it, round after round, while that master does not answer
// (until the other registration's end): it does not register on the
// masters only it uses and acquire there while the other set holds the
// key on its own majority.
func TestMembersConflictRemembered(t *testing.T) {
	redlock.SetFenceCounterTTL(t, time.Minute)
	addrs, _ := realN(t, 5)
	ctx := ctxT(t)
	old := fencedOver(t, addrs[:3])
	redlock.RegisterMembers(t, old)
	proxy := testserver.ProxyT(t, addrs[2])
	late := fencedOver(t, []string{proxy.Addr(), addrs[3], addrs[4]})
	if _, err := late.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("a set two masters away: %v, want ErrInvalid", err)
	}
	proxy.Blackhole(true)
	defer proxy.Blackhole(false)
	n := redlock.MemberRounds(late)
	// Two more rounds (one wholly after the blackhole), or one that
	// registered (which the assertions below then catch).
	waitFor(t, "two more rounds of the refused Locker", func() bool {
		return redlock.MemberRounds(late) >= n+2 || len(registrations(t, addrs[3])) != 0
	})
	if _, err := late.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("the conflict's master silent: %v, want ErrInvalid still", err)
	}
	for _, a := range addrs[3:] {
		if r := registrations(t, a); len(r) != 0 {
			t.Errorf("%s holds %v: the refused Locker registered", a, r)
		}
	}
}

// TestMembersRefusedKeepsOthers: a Locker refused between its passes
// removes only the registrations its pass created, not those of another
// open Locker of the same set.
func TestMembersRefusedKeepsOthers(t *testing.T) {
	redlock.SetFenceCounterTTL(t, 10*time.Second)
	addrs, _ := realN(t, 5)
	ctx := ctxT(t)
	arm := registerBetweenPasses(t, addrs)
	first := fencedOver(t, addrs[2:])
	redlock.RegisterMembers(t, first)
	arm()
	second := fencedOver(t, addrs[2:])
	if _, err := second.TryAcquire(ctx, "k"); !errors.Is(err, lockswap.ErrInvalid) {
		t.Fatalf("a Locker whose registration met another set's: %v, want ErrInvalid", err)
	}
	for _, a := range addrs[3:] {
		if r := registrations(t, a); len(r) != 1 {
			t.Errorf("%s holds %v, want the first Locker's registration, which the refused one shares", a, r)
		}
	}
}

// registerBetweenPasses returns what makes the next membership round of
// any Locker find, between its check and its registration, the
// registration of a client over addrs[:3] on master 2: the race of two
// clients starting at once. That registration is taken from a Locker over
// those masters, then removed, before it returns.
func registerBetweenPasses(t *testing.T, addrs []string) (arm func()) {
	t.Helper()
	ctx := ctxT(t)
	old := fencedOver(t, addrs[:3])
	redlock.RegisterMembers(t, old)
	old.Close()
	reg := registrations(t, addrs[2])
	for _, a := range addrs[:3] {
		redistest.GoRedisClient(t, a).Del(ctx, redlock.MembersKey)
	}
	return func() {
		var once sync.Once
		redlock.SetBetweenPasses(t, func() {
			once.Do(func() {
				for f, v := range reg {
					redistest.GoRedisClient(t, addrs[2]).HSet(ctx, redlock.MembersKey, f, v)
				}
			})
		})
	}
}
